"""src/check_layering.py on a small tree: an include against the declared arrows fails naming
the file, line, included header and the rooms allowed; allowed includes pass and write the stamp."""
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "src/check_layering.py"


def check(root: pathlib.Path, *rooms: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root), str(root / "stamp"), *rooms],
                          capture_output=True, text=True)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for folder in ["src/core", "src/data", "kernels", "capi"]:
            (root / folder).mkdir(parents=True)
        (root / "src/core/error.h").write_text("#pragma once\n")
        (root / "src/data/reader.cpp").write_text('#include "data/reader.h"\n#include "core/error.h"\n')
        (root / "kernels/cast.cu").write_text('#include "kernels/cast.h"\n\n#include "data/reader.h"\n')
        good = check(root, "core=", "data=core", "kernels=core,data", "capi=core")
        assert good.returncode == 0 and (root / "stamp").exists(), good.stderr
        (root / "stamp").unlink()
        bad = check(root, "core=", "data=core", "kernels=core", "capi=core")
        expected = ("kernels/cast.cu:3: room 'kernels' includes 'data/reader.h' of room 'data' "
                    "(it may use: core; see bert_rooms in src/meson.build)")
        assert bad.returncode == 1 and expected in bad.stderr, bad.stderr
        assert not (root / "stamp").exists()
    print("layering check: a wrong-direction include fails the build, allowed ones pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
