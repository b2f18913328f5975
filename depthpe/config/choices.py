"""Value sets shared by configs of several layers, kept here (light, no torch) so that the model, the
viewer and the command settings name one tuple instead of importing each other."""

__all__ = ["DTYPES"]

DTYPES = ("fp32", "bf16")  # fp32, or bfloat16 autocast (CPU or GPU); metrics stay float32
