"""A local embedding model traced once and kept on disk, so that a command that embeds starts fast.

Loading a sentence-transformers model means importing ``sentence_transformers`` and
``transformers`` (most of a command's start-up: seconds on an idle machine) and tracing the model
with TorchScript (``embed._compile``). The first process that loads a model saves what it traced
into the embedding cache (setting ``embed_cache``; default ``$XDG_CACHE_HOME/skillstream``, else
``~/.cache/skillstream``; ``off`` keeps nothing), with what running it needs: the input names, the
width, the token limit and the padding id. Later processes load that file with ``torch.jit.load``
and tokenise with the model's own ``tokenizer.json`` through the ``tokenizers`` library, neither
of which imports ``transformers``. When the numpy encoder (``skillstream.encoder``) reproduces the
model, its weights are kept too (``<entry>.npz``): a search embeds its query with them and never
imports ``torch``.

Nothing here changes a stored vector: the traced module is the one the slow path runs, and the
fast tokeniser is kept only if it gave exactly the token rows of the model's own preprocessing on
a probe of awkward texts (long, empty, padded with spaces, accented, Chinese, emoji) when the
entry was written. The numpy weights are kept only if the encoder gave the traced model's
vectors on the same probe, to within :data:`ENCODER_TOLERANCE`.

An entry is named by a hash of the model folder's files (names, sizes and modification times),
the ``torch`` and ``tokenizers`` versions and this module's format, so a changed model or library
makes a new entry; an entry that cannot be read is ignored (and written again by the slow path).
An entry is about twice the model's size, and every reinstall makes a new one, so writing an
entry removes the entries of the same model that were least recently used, keeping
:data:`KEEP` (loading an entry marks it used).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FORMAT = 2
"""Version of the entry layout; part of every entry's name."""

OFF = ("off", "none", "false", "0")

KEEP = 3
"""Entries kept per model folder name: a few environments on one machine (a project's and a test
environment, say) each keep theirs, and the entries of environments gone do not pile up."""

SUFFIXES = (".json", ".pt", ".npz")
"""The files of an entry; the description (``.json``) is written last and carries its time."""

ENCODER_TOLERANCE = 1e-5
"""Largest difference, in any coordinate of a unit vector, allowed between the numpy encoder and
the traced model on :data:`PROBE` (measured on the bundled model: below 4e-7)."""

PROBE = [
    "A probe sentence, so the traced model can be checked against the plain one.",
    "ok",
    "",
    "   padded with spaces   ",
    "Caroline went to the support group on Sunday and told Melanie about it afterwards.",
    "我对花生严重过敏，所以请不要推荐含花生的菜。",
    "Café naïve façade — déjà vu 🎉 ½ ÅNGSTRÖM",
    " ".join(f"word{i} and more text" for i in range(200)),  # past the token limit
]
"""Texts the fast tokeniser must tokenise exactly as the model's own preprocessing does."""


def cache_dir(setting: str | None = None) -> Path | None:
    """The embedding cache folder of ``setting`` (``None`` or empty: the default; ``off``:
    none)."""
    if setting is not None and setting.strip().lower() in OFF:
        return None
    if setting:
        return Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "skillstream"


def entry_name(model_dir: str) -> str:
    """The cache entry of a model folder with the libraries installed now (read from their
    metadata: nothing is imported)."""
    from importlib.metadata import version

    h = hashlib.blake2b(digest_size=12)
    h.update(f"{FORMAT}|{version('torch')}|{version('tokenizers')}|".encode())
    root = Path(model_dir).resolve()
    h.update(str(root).encode("utf-8", "surrogatepass"))
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        st = path.stat()
        h.update(f"|{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return f"embed-{root.name}-{h.hexdigest()}"


class CachedModel:
    """A traced model and its tokeniser, loaded from the cache (no ``transformers`` import)."""

    def __init__(self, module: Any, tokenizer: Any, meta: dict[str, Any]) -> None:
        self.module = module
        self.tokenizer = tokenizer
        self.keys: tuple[str, ...] = tuple(meta["keys"])
        self.dim = int(meta["dim"])
        self.max_len = int(meta["max_len"])
        self.pad_id = int(meta["pad_id"])

    def tokenize(self, texts: Sequence[str]) -> dict[str, Any]:
        """Token rows of ``texts``, padded to the longest, as the model's preprocessing gives."""
        return tokenize(self.tokenizer, self.keys, texts)

    def run(self, inputs: dict[str, Any]) -> Any:
        return self.module(*(inputs[k] for k in self.keys))


def fast_tokenizer(model_dir: str, max_len: int, pad_id: int) -> Any | None:
    """The model's ``tokenizer.json`` with its truncation and padding set as preprocessing sets
    them, or ``None`` when the folder has none."""
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    if max_len:
        tok.enable_truncation(max_length=max_len)
    else:
        tok.no_truncation()
    tok.enable_padding(pad_id=pad_id, pad_token=tok.id_to_token(pad_id) or "[PAD]")
    return tok


def token_rows(tokenizer: Any, keys: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
    """Token rows of ``texts`` as int64 numpy arrays, one per input name in ``keys``."""
    import numpy as np

    encodings = tokenizer.encode_batch([str(t) for t in texts])
    columns = {
        "input_ids": [e.ids for e in encodings],
        "attention_mask": [e.attention_mask for e in encodings],
        "token_type_ids": [e.type_ids for e in encodings],
    }
    return {k: np.asarray(columns[k], dtype=np.int64) for k in keys}


def tokenize(tokenizer: Any, keys: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
    """Token rows of ``texts`` as torch tensors (what the traced model takes)."""
    import torch

    return {k: torch.from_numpy(v) for k, v in token_rows(tokenizer, keys, texts).items()}


def agrees(tokenizer: Any, keys: Sequence[str], preprocess: Any) -> bool:
    """Whether the fast tokeniser gives the model's own token rows on :data:`PROBE`, alone and
    as one batch."""
    import torch

    batches = [[t] for t in PROBE] + [list(PROBE)]
    for texts in batches:
        want = preprocess(texts)
        got = tokenize(tokenizer, keys, texts)
        for k in keys:
            w = want.get(k)
            if not isinstance(w, torch.Tensor) or w.shape != got[k].shape:
                return False
            if not torch.equal(w.to(torch.long), got[k]):
                return False
    return True


def save(
    folder: Path,
    name: str,
    module: Any,
    meta: dict[str, Any],
    weights: dict[str, Any] | None = None,
) -> None:
    """Write an entry (the module, the numpy encoder's ``weights`` if any, then the description
    that names them; each file replaced atomically)."""
    import torch

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as f:
            tmp_module = f.name
        torch.jit.save(module, tmp_module)
        os.replace(tmp_module, folder / f"{name}.pt")
        if weights is not None:
            import numpy as np

            with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as f:
                np.savez(f, **weights)
                tmp_weights = f.name
            os.replace(tmp_weights, folder / f"{name}.npz")
        with tempfile.NamedTemporaryFile(
            "w", dir=folder, suffix=".tmp", delete=False, encoding="utf-8"
        ) as f:
            json.dump(meta, f)
            tmp_meta = f.name
        os.replace(tmp_meta, folder / f"{name}.json")
    except OSError as e:  # a read-only or full cache only costs the next start-up its speed
        log.info("embedding cache not written (%s: %s)", type(e).__name__, e)
        return
    prune(folder, name)


def prune(folder: Path, name: str, keep: int = KEEP) -> list[str]:
    """Remove the entries of ``name``'s model folder but the ``keep`` last used (``name`` among
    them); returns the names removed."""
    model = name.rsplit("-", 1)[0] + "-"
    used: dict[str, float] = {}
    for path in folder.glob(f"{model}*.json"):
        entry = path.name[: -len(".json")]
        if entry.rsplit("-", 1)[0] + "-" != model:  # a model whose name extends this one's
            continue
        try:
            used[entry] = path.stat().st_mtime
        except OSError:
            continue
    used[name] = float("inf")
    stale = sorted(used, key=lambda e: used[e], reverse=True)[max(keep, 1) :]
    for entry in stale:
        for suffix in SUFFIXES:
            try:
                (folder / f"{entry}{suffix}").unlink(missing_ok=True)
            except OSError as e:  # another process's entry may be in use or already gone
                log.info("embedding cache entry %s not removed (%s)", entry, e)
    return stale


def touch(folder: Path, name: str) -> None:
    """Mark an entry used (its description's time), so pruning keeps the entries in use."""
    try:
        os.utime(folder / f"{name}.json")
    except OSError:
        pass


def load(folder: Path, name: str, model_dir: str) -> CachedModel | None:
    """The entry, or ``None`` when there is none or it cannot be used."""
    meta_path, module_path = folder / f"{name}.json", folder / f"{name}.pt"
    if not meta_path.is_file() or not module_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or not meta.get("fast_tokenizer"):
            return None
        tokenizer = fast_tokenizer(model_dir, int(meta["max_len"]), int(meta["pad_id"]))
        if tokenizer is None:
            return None
        import torch

        module = torch.jit.load(str(module_path), map_location="cpu")
        module.eval()
        touch(folder, name)
        return CachedModel(module, tokenizer, meta)
    except Exception as e:  # noqa: BLE001 - a broken entry is rebuilt by the slow path
        log.info("embedding cache entry %s not used (%s: %s)", name, type(e).__name__, e)
        return None


class QueryEncoder:
    """The numpy encoder of an entry with the model's tokeniser: vectors without ``torch``."""

    def __init__(self, encoder: Any, tokenizer: Any, keys: Sequence[str]) -> None:
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.keys = tuple(keys)

    def encode(self, texts: Sequence[str]) -> Any:
        rows = token_rows(self.tokenizer, self.keys, texts)
        return self.encoder(rows["input_ids"], rows["attention_mask"], rows.get("token_type_ids"))


def load_encoder(folder: Path, name: str, model_dir: str) -> QueryEncoder | None:
    """The entry's numpy encoder, or ``None`` when the entry has none (or cannot be read)."""
    meta_path, weights_path = folder / f"{name}.json", folder / f"{name}.npz"
    if not meta_path.is_file() or not weights_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or not meta.get("fast_tokenizer") or not meta.get("numpy"):
            return None
        tokenizer = fast_tokenizer(model_dir, int(meta["max_len"]), int(meta["pad_id"]))
        if tokenizer is None:
            return None
        import numpy as np

        from skillstream.encoder import Config, Encoder

        with np.load(weights_path) as data:
            weights = {k: data[k] for k in data.files}
        touch(folder, name)
        return QueryEncoder(
            Encoder(weights, Config.from_dict(meta["numpy"])), tokenizer, meta["keys"]
        )
    except Exception as e:  # noqa: BLE001 - queries then go through the traced model
        log.info("numpy encoder of %s not used (%s: %s)", name, type(e).__name__, e)
        return None


def read_dim(folder: Path, name: str) -> int | None:
    """The width entry ``name`` records, without loading anything else."""
    try:
        meta = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        return int(meta["dim"]) if meta.get("format") == FORMAT else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
