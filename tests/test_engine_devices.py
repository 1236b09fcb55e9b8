"""Where the engine runs and in what precision (engine/devices.py), and `prefixguard replay --target
engine --device D --dtype T` handing both to the engine: "auto" picks the GPU with bfloat16 where CUDA
is, else the CPU with float32; a device or dtype that cannot work is one line and exit 2."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers.cli import CliRunner

from prefixguard.cli import main
from prefixguard.engine.devices import pick
from prefixguard.replay import targets

ROOT = Path(__file__).resolve().parent.parent
BODIES = ROOT / "examples" / "requests" / "anthropic" / "append_only"
CUDA = torch.cuda.is_available()


def test_auto_picks_by_what_the_machine_has():
    assert pick("auto", "auto") == (("cuda", "bfloat16") if CUDA else ("cpu", "float32"))
    assert pick("cpu", "auto") == ("cpu", "float32")
    assert pick("cpu", "float16") == ("cpu", "float16")
    with pytest.raises(ValueError, match="cpu, cuda, auto"):
        pick("tpu", "auto")
    if not CUDA:
        with pytest.raises(ValueError, match="no CUDA device"):
            pick("cuda", "bfloat16")


@pytest.fixture
def bodies(tmp_path: Path) -> Path:
    """Two request bodies, the second appending to the first."""
    for name in ("a.json", "b.json"):
        shutil.copy(BODIES / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("args,want", [(["--dtype", "bfloat16"], torch.bfloat16),
                                       (["--device", "auto", "--dtype", "auto"],
                                        torch.bfloat16 if CUDA else torch.float32),
                                       ([], torch.float32)])
def test_replay_runs_the_engine_where_and_as_asked(bodies, monkeypatch, args, want):
    made = []

    class Recorded(targets.EngineTarget):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append((self.engine.device.type, self.engine.dtype, self.engine.model.model.embed_tokens.weight.dtype))

    monkeypatch.setattr(targets, "EngineTarget", Recorded)
    result = CliRunner().invoke(main, ["replay", bodies, "--target", "engine", "--max-tokens", "2", "-o", "json",
                                       "--no-reuse-run", *args])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["requests"] == 2 and doc["errors"] == 0 and doc["no_reuse"]["requests"] == 2
    device = "cuda" if CUDA and "auto" in args else "cpu"
    assert made == [(device, want, want)] * 2          # the reuse run and the no-reuse run, weights in that dtype


@pytest.mark.parametrize("args,says", [(["--device", "tpu"], "'--device': 'tpu' is not one of"),
                                       (["--dtype", "int8"], "'--dtype': 'int8' is not one of"),
                                       (["--target", "sim", "--device", "cpu"], "--device: only the engine target"),
                                       (["--target", "sim", "--dtype", "auto"], "--dtype: only the engine target"),
                                       *([] if CUDA else [(["--device", "cuda"], "--device: device cuda: no CUDA")])])
def test_a_device_or_dtype_that_cannot_work_is_one_line_and_exit_2(bodies, args, says):
    result = CliRunner().invoke(main, ["replay", bodies, "--target", "engine", *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefixguard: error:") and says in lines[0], result.stderr


@pytest.mark.parametrize("args,says", [(["--attention", "flash"], "'--attention': 'flash' is not one of"),
                                       (["--dtype", "int8"], "'--dtype': 'int8' is not one of"),
                                       (["--device", "tpu"], "cannot start the engine: device must be one of")])
def test_engine_serve_refuses_a_backend_device_or_dtype_in_one_line(args, says):
    result = CliRunner().invoke(main, ["engine", "serve", "--port", "0", *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr
