"""pytest setup for tests/oracle: the test modules import their siblings (torch_bert,
engine_ctypes, ...) by name, whatever directory pytest is started from."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
