"""Every function of capi/bert.h has its counterpart in each binding: a call in the Python
extension (bindings/python/src/native.cpp), in the idiomatic Go package (bindings/go/*.go,
through the SWIG package capi or cgo), and in the Rust sys crate's declarations and the safe
crate's calls. Exits 1 listing what is missing."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def header_functions() -> list[str]:
    text = (ROOT / "capi/bert.h").read_text()
    return re.findall(r"^BERT_API\b[^;(]*?\b(bert_\w+)\s*\(", text, flags=re.M)


def read(pattern: str) -> str:
    return "\n".join(p.read_text() for p in sorted(ROOT.glob(pattern)) if not p.name.endswith("_test.go"))


def main() -> int:
    functions = header_functions()
    if len(functions) < 30:
        print(f"parsed only {len(functions)} functions from capi/bert.h: the parser is out of date")
        return 1
    python = read("bindings/python/src/native.cpp")
    go = read("bindings/go/*.go")
    rust_sys = read("bindings/rust/bertengine-sys/src/*.rs")
    rust = read("bindings/rust/bertengine/src/*.rs")
    checks = {
        "Python (bindings/python/src/native.cpp)": lambda f: re.search(rf"\b{f}\b", python),
        "Go (bindings/go/*.go)": lambda f: re.search(rf"\b(capi\.B{f[1:]}|C\.{f})\b", go),
        "Rust sys (bertengine-sys/src/lib.rs)": lambda f: re.search(rf"\bpub fn {f}\(", rust_sys),
        "Rust (bertengine/src/*.rs)": lambda f: re.search(rf"\bsys::{f}\(", rust),
    }
    missing = [(where, f) for where, found in checks.items() for f in functions if not found(f)]
    for where, f in missing:
        print(f"{f} of capi/bert.h is missing from the {where} binding")
    print(f"{len(functions)} functions of capi/bert.h, {len(missing)} missing in the bindings")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
