"""Everything capi/bert.h declares has its counterpart in each binding, so the header is the one
place the ABI is written and a binding that falls behind it fails here:
  - every function: a call in the Python extension (bindings/python/src/native.cpp), in the
    idiomatic Go package (bindings/go/*.go, through the SWIG package capi or cgo), and in the Rust
    sys crate's declarations and the safe crate's calls;
  - every struct field: read or written by the Python extension, the Go package (SWIG's
    Get/Set accessors or cgo) and the Rust safe crate, and declared in the sys crate (whose
    layout bertengine-sys/tests/layout.rs checks against the C compiler's);
  - every enum value: named from the header, never restated as a number, by the Python extension
    (which exports them to bertengine.errors and bertengine.session) and the Go package (cgo's
    C.NAME), and declared with the header's value in the Rust sys crate and named by the safe
    crate (sys::NAME).
Exits 1 listing what is missing."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def header_functions() -> list[str]:
    text = (ROOT / "capi/bert.h").read_text()
    return re.findall(r"^BERT_API\b[^;(]*?\b(bert_\w+)\s*\(", text, flags=re.M)


def header_declarations() -> str:
    return re.sub(r"/\*.*?\*/", "", (ROOT / "capi/bert.h").read_text(), flags=re.S)


def header_struct_fields() -> list[tuple[str, str]]:
    """(struct, field) of every public struct but its struct_size."""
    fields = []
    for body, name in re.findall(r"typedef struct \w+\s*\{(.*?)\}\s*(\w+);", header_declarations(), flags=re.S):
        for decl in filter(None, (d.strip() for d in body.split(";"))):
            field = re.search(r"(\w+)\s*(?:\[[^\]]*\])?$", decl).group(1)
            if field != "struct_size":
                fields.append((name, field))
    return fields


def header_enum_values() -> list[tuple[str, int]]:
    """(name, value) of every enum value."""
    bodies = re.findall(r"typedef enum \w+\s*\{(.*?)\}\s*\w+;", header_declarations(), flags=re.S)
    return [(name, int(value)) for body in bodies for name, value in re.findall(r"(BERT_\w+)\s*=\s*(\d+)", body)]


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
    missing = [f"{f} is missing from the {where} binding" for where, found in checks.items() for f in functions
               if not found(f)]

    fields = header_struct_fields()
    field_checks = {
        "Python (bindings/python/src/native.cpp)": lambda s, f: re.search(rf"\.{f}\b", python),
        "Go (bindings/go/*.go)": lambda s, f: re.search(rf"\.(Get|Set){f[0].upper()}{f[1:]}\(|\.{f}\b", go),
        "Rust sys (bertengine-sys/src/lib.rs)": lambda s, f: re.search(
            rf"pub struct {s} \{{[^}}]*\bpub {f}:", rust_sys),
        "Rust (bertengine/src/*.rs)": lambda s, f: re.search(rf"\.{f}\b", rust),
    }
    missing += [f"field {s}.{f} is not carried by the {where} binding" for where, found in field_checks.items()
                for s, f in fields if not found(s, f)]

    values = header_enum_values()
    python_errors = read("bindings/python/bertengine/*.py")
    value_checks = {
        "Python (bindings/python/src/native.cpp)": lambda n, v: re.search(rf"BERT_ENUM\({n}\)", python),
        "Go (bindings/go/*.go)": lambda n, v: re.search(rf"\bC\.{n}\b", go),
        "Rust sys (bertengine-sys/src/lib.rs)": lambda n, v: re.search(rf"\bpub const {n}: \w+ = {v};", rust_sys),
        "Rust (bertengine/src/*.rs)": lambda n, v: n == "BERT_OK" or re.search(rf"\bsys::{n}\b", rust),
    }
    missing += [f"enum value {n} = {v} is not named (with that value) by the {where} binding"
                for where, found in value_checks.items() for n, v in values if not found(n, v)]
    restated = re.findall(r"status, status_name = \d+|\b\w+ *= *\{[^}]*\": *\d+", python_errors)
    missing += [f"bindings/python/bertengine restates a header value as a number: {r!r}" for r in restated]

    for line in missing:
        print(line)
    print(f"{len(functions)} functions, {len(fields)} struct fields and {len(values)} enum values of capi/bert.h; "
          f"{len(missing)} missing in the bindings")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
