"""Where reference/torch_reference.py (the PyTorch specification of every module) is, for
scripts/make_fixtures.py, which imports it."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reference_path():
    """NF_TORCH_REFERENCE, else the repository's own reference/torch_reference.py."""
    return os.environ.get("NF_TORCH_REFERENCE") or os.path.join(REPO, "reference", "torch_reference.py")
