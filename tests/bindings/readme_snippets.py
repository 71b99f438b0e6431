"""Runs a language's section of bindings/README.md as a new user would, in a fresh copy of the
repository: the install block's commands, the program saved where the block says, then the
block's run command; checks the program trained 10 steps, resumed with identical losses and
reported the configuration error.

    readme_snippets.py LANGUAGE BUILD_DIR [BLOCK]

LANGUAGE is python, go or rust; BLOCK picks the install block (default: the first). The copy
holds the tracked and untracked-but-not-ignored files (what a clone of the working tree would
hold). An install line that builds the engine (`meson setup build ... && ninja -C build`) is
replaced by a link `build` -> BUILD_DIR, the libbert this meson build just made. Exits 77
(skip) when the language's toolchain is absent.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTIONS = {"python": "Python", "go": "Go", "rust": "Rust"}
TOOLS = {"python": ["/usr/bin/python3"], "go": ["go", "swig"], "rust": ["cargo"]}
SAVE = re.compile(r"^# save the program below as (\S+), then:$", re.M)
ENGINE_BUILD = re.compile(r"^meson setup build\b.*&& ninja -C build$")
EXPECTED = [
    r"rank 0/1: step 10 loss \d+\.\d+ \(mean \d+\.\d+\)",
    r"resumed at step 10; next losses identical: (true|True)",
    r"error BERT_ERR_CONFIG: unknown config key 'train\.stpes'",
]
TOOL_OUTPUT = [r"checkpoint +ckpt/ckpt_10\.h5 \(checksum verified\)"]  # bert-ckpt of the package


def section(language: str) -> tuple[list[str], str]:
    """The section's install blocks (sh) and its program."""
    text = (ROOT / "bindings/README.md").read_text()
    body = text.split(f"\n## {SECTIONS[language]} ", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", body, flags=re.M | re.S)
    installs = [code for lang, code in blocks if lang == "sh" and SAVE.search(code)]
    (program,) = [code for lang, code in blocks if lang == language]
    return installs, program


def fresh_copy(dest: pathlib.Path) -> None:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"],
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def run(script: str, cwd: pathlib.Path, env: dict) -> str:
    print(f"$ (in {cwd})\n{script}", flush=True)
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, flush=True)
    if p.returncode != 0:
        sys.exit(f"the README's commands failed (exit {p.returncode})")
    return p.stdout


def main() -> int:
    language, build_dir = sys.argv[1], pathlib.Path(sys.argv[2]).resolve()
    block = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    missing = [t for t in TOOLS[language] if not shutil.which(t)]
    if language == "python" and not missing and subprocess.run(
            ["/usr/bin/python3", "-c", "import ensurepip, mesonpy, numpy"], capture_output=True).returncode:
        missing.append("python3-venv, python3-mesonpy and python3-numpy")
    if language == "python" and subprocess.run(["pkg-config", "--exists", "pybind11"]).returncode:
        missing.append("pybind11-dev")
    if missing:
        print(f"skipped: needs {', '.join(missing)}")
        return 77
    if not (ROOT / ".git").exists():
        print("skipped: needs a git checkout to copy")
        return 77
    installs, program = section(language)
    setup, run_cmd = SAVE.split(installs[block], 1)[0], SAVE.split(installs[block], 1)[2]
    save_as = SAVE.search(installs[block]).group(1)

    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "BERT_LIB_DIR", "BERT_INCLUDE_DIR",
                        "PYTHONPATH", "BERTENGINE_NATIVE_DIR")}
    env["PATH"] = "/usr/bin:" + env.get("PATH", "")  # Debian's python3 (numpy, meson-python)
    cache = build_dir / "readme-cache"
    env.pop("GOFLAGS", None)
    env.update(GOPROXY="off", GOCACHE=str(cache / "go"),
               CARGO_NET_OFFLINE="true", CARGO_TARGET_DIR=str(cache / f"cargo-{language}"))
    with tempfile.TemporaryDirectory(prefix=f"readme-{language}-") as tmp:
        clone = pathlib.Path(tmp) / "bertengine"
        fresh_copy(clone)
        lines = []
        for line in setup.splitlines():
            if ENGINE_BUILD.match(line):
                (clone / "build").symlink_to(build_dir)  # the engine this build just made
            else:
                lines.append(line)
        workdir_script = "\n".join(lines) + "\npwd\n"
        workdir = pathlib.Path(run(workdir_script, clone, env).splitlines()[-1])
        (workdir / save_as).parent.mkdir(parents=True, exist_ok=True)
        (workdir / save_as).write_text(program)
        out = run(run_cmd, workdir, env)
    expected = EXPECTED + (TOOL_OUTPUT if language == "python" else [])
    missing = [e for e in expected if not re.search(e, out)]
    for e in missing:
        print(f"expected a line matching {e!r} in the program's output")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
