"""The Hugging Face Hub: uploads in a background thread (``pusher``) and the model card written
next to every exported model (``card``)."""
