#!/usr/bin/env python3
"""The build's layering check: every folder of the engine (a "room": src/core, src/text, ...,
kernels, capi) may include only its own headers and those of the rooms it declares in
src/meson.build (`bert_rooms`). A wrong-direction include fails the build naming the file, the
line and the rooms allowed.

Usage: check_layering.py SOURCE_ROOT STAMP ROOM=DEP,DEP ...   (writes STAMP when clean)
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([A-Za-z0-9_]+)/[^"]+"', re.M)
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}


def room_of(path: pathlib.Path, root: pathlib.Path, rooms: dict) -> str | None:
    parts = path.relative_to(root).parts
    if parts[0] == "src" and len(parts) > 2 and parts[1] in rooms:
        return parts[1]
    if parts[0] in rooms:
        return parts[0]
    return None


def main() -> int:
    root, stamp = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    rooms = {}
    for spec in sys.argv[3:]:
        name, _, deps = spec.partition("=")
        rooms[name] = set(filter(None, deps.split(",")))
    errors = []
    for folder in [root / "src", root / "kernels", root / "capi"]:
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            room = room_of(path, root, rooms)
            if room is None:
                continue
            text = path.read_text(errors="replace")
            for match in INCLUDE.finditer(text):
                target = match.group(1)
                if target in rooms and target != room and target not in rooms[room]:
                    line = text.count("\n", 0, match.start()) + 1
                    allowed = ", ".join(sorted(rooms[room])) or "none"
                    errors.append(f"{path.relative_to(root)}:{line}: room '{room}' includes "
                                  f"'{match.group(0).split(chr(34))[1]}' of room '{target}' "
                                  f"(it may use: {allowed}; see bert_rooms in src/meson.build)")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    stamp.write_text("layering clean\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
