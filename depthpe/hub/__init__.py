"""The Hugging Face Hub: uploads in a background thread (``pusher``), how long they may wait
(``timeouts``), repository ids, access and layout (``repo``), what an exported model folder holds
(``folders``) and the model card written next to every exported model (``card``)."""
