"""Where ../shared/reference/torch_reference.py (the PyTorch specification) is, for the scripts
that import it (fixtures, ONNX export, the PyTorch benchmark peer)."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reference_path():
    """NF_TORCH_REFERENCE, else shared/reference/torch_reference.py in the repository's parent directory
    (or, for a git worktree kept deeper, the nearest ancestor that has it)."""
    if os.environ.get("NF_TORCH_REFERENCE"):
        return os.environ["NF_TORCH_REFERENCE"]
    d = os.path.dirname(REPO)
    while True:
        p = os.path.join(d, "shared", "reference", "torch_reference.py")
        if os.path.exists(p) or os.path.dirname(d) == d:
            return p
        d = os.path.dirname(d)
