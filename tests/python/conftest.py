"""Fixtures of the Python bindings' tests (tests/CMakeLists.txt runs them through ctest with
PYTHONPATH=build/python). The tiny model is made by make_model into a temporary folder; the real
model (SmolLM2-135M-Instruct, scripts/fetch_smollm2.sh) follows tests/real_model_util.h's rule: a
missing file skips its tests, and fails them under EDGELM_REQUIRE_REAL_MODEL=1 (CI)."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EDGELM_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BIN_DIR = pathlib.Path(os.environ.get("EDGELM_BIN_DIR", SOURCE_DIR / "build" / "bin"))


def tool(name):
    path = BIN_DIR / name
    if not path.exists():
        pytest.fail(f"{path} is missing: build the tools first (cmake --build build)")
    return str(path)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    subprocess.run([tool("make_model"), "--preset", "tiny", "--format", "hf", "--quant", "f32",
                    "-s", "7", "--out", str(out)], check=True, capture_output=True)
    return str(out)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_path):
    import edgelm
    return edgelm.Model.load(tiny_model_path, threads=2)


def real_model_file():
    env = os.environ.get("EDGELM_SMOLLM2")
    if env:
        return pathlib.Path(env)
    fixture = SOURCE_DIR / "tests" / "fixtures" / "llama_cpp" / "smollm2-135m-instruct-q4_1.json"
    return SOURCE_DIR / "build" / "models" / json.loads(fixture.read_text())["model_file"]


@pytest.fixture(scope="session")
def smollm2_path():
    path = real_model_file()
    if not path.exists():
        message = f"{path} is missing (scripts/fetch_smollm2.sh fetches it)"
        if os.environ.get("EDGELM_REQUIRE_REAL_MODEL") == "1":
            pytest.fail(message + " and EDGELM_REQUIRE_REAL_MODEL=1")
        pytest.skip(message)
    return str(path)


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    import edgelm
    return edgelm.Model.load(smollm2_path, threads=2)


@pytest.fixture(scope="session")
def text_path():
    """A text in the repository for the real-model tests, long enough for their windows (the
    tool and the bindings read the same file, so its content does not matter)."""
    return str(SOURCE_DIR / "docs" / "architecture.md")
