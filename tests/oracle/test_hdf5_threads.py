"""A checkpoint that fails to open on a worker thread (as in the Python and Go bindings, which
run engine calls off the main thread) must leave HDF5 able to shut down cleanly at exit."""
import os
import subprocess
import sys
import textwrap

import pytest

LIB = os.environ.get("BERT_LIB", "")
pytestmark = pytest.mark.skipif(not os.path.exists(LIB), reason="libbert is not built (BERT_LIB)")


def test_failed_open_on_worker_thread_exits_cleanly(tmp_path):
    (tmp_path / "ckpt_5.h5").write_bytes(b"not an HDF5 file" * 100)
    program = textwrap.dedent(f"""
        import ctypes, threading
        lib = ctypes.CDLL({LIB!r})
        s = ctypes.c_void_p()
        assert lib.bert_session_create(b'{{"model": "bert-tiny", "train": {{"threads": 1}}}}', None, ctypes.byref(s)) == 0
        step = ctypes.c_int64(0)
        lib.bert_last_error.restype = ctypes.c_char_p
        def work():
            assert lib.bert_checkpoint_resume(s, {str(tmp_path).encode()!r}, ctypes.byref(step)) != 0
            print(lib.bert_last_error().decode())
        t = threading.Thread(target=work); t.start(); t.join()
        lib.bert_session_destroy(s)
    """)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "fail verification and none of them is valid" in result.stdout, result.stdout
    assert "closing library" not in result.stderr, result.stderr
