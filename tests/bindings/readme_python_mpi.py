"""The Python program of bindings/README.md, unchanged, as two ranks under mpirun: each rank
reports its place (rank r of 2) and the loss averaged over both, and each resumes from the
checkpoint rank 0 wrote with identical losses. Runs the package from the source tree with this
build's extension (the README's build-tree route).

    readme_python_mpi.py BUILD_DIR
"""
import os
import pathlib
import re
import sys
import tempfile

from readme_snippets import ROOT, run, section


def main() -> int:
    build_dir = pathlib.Path(sys.argv[1]).resolve()
    _, program = section("python")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings/python"),
               BERTENGINE_NATIVE_DIR=str(build_dir / "tests/bindings"))
    env.pop("LD_LIBRARY_PATH", None)
    root_flag = "--allow-run-as-root" if os.getuid() == 0 else ""
    with tempfile.TemporaryDirectory(prefix="readme-python-mpi-") as tmp:
        (pathlib.Path(tmp) / "host.py").write_text(program)
        out = run(f"mpirun -np 2 --oversubscribe {root_flag} -x PYTHONPATH -x BERTENGINE_NATIVE_DIR "
                  f"/usr/bin/python3 host.py", pathlib.Path(tmp), env)
    means = re.findall(r"rank (\d)/2: step 10 loss \S+ \(mean (\S+)\)", out)
    resumed = re.findall(r"resumed at step 10; next losses identical: True", out)
    ok = sorted(r for r, _ in means) == ["0", "1"] and len({m for _, m in means}) == 1 and len(resumed) == 2
    if not ok:
        print("expected ranks 0 and 1 of 2 with one mean loss, and two identical resumes")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
