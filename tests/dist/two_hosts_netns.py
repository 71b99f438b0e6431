"""Two "hosts" on one machine: Linux network namespaces joined by a veth pair (10.77.0.1 and
10.77.0.2, addresses that exist only inside the namespaces), Open MPI launching one bert-train
rank into each over TCP (mpirun runs in host 0; an `ip netns exec` launch agent starts the Open
MPI daemon of host 1 in its namespace; the daemons' out-of-band channel and the TCP BTL use only
the veth interface).

1. Training across the two hosts equals one process with the world's batch: the dist suite's
   `dist_training` program (each rank compares its two-rank session with a one-process session
   on the same global batches, within 1e-5) passes across them; and `bert-train` across them is
   bit-identical to the same two ranks without namespaces.
2. Host 1's link is cut (`ip link set eth0 down`) mid-run: each rank, each on its own side of the
   cut, prints BERT_ERR_DISTRIBUTED within dist.timeout_s (+ the 1.5 s roll call) of the cut
   (times printed), naming the other rank as lost; the checkpoints written before the cut are
   unchanged, and the surviving host alone resumes from them (2 ranks -> 1) and finishes.
3. With the link back, `bert-train --resume` finishes the run: final weights bit-identical to the
   uninterrupted two-host run.

Exits 77 (meson's skip) where namespaces cannot be made (not root, no CAP_NET_ADMIN, no
iproute2) or mpirun is absent. Namespaces and every process in them are removed on any exit.
Usage: two_hosts_netns.py BUILD_DIR"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

SKIP = 77
TIMEOUT_S = 8.0  # dist.timeout_s of the runs
STEPS, EVERY = 40, 5
TAG = f"b16n{os.getpid() % 100000}"
NAMESPACES = [f"{TAG}h0", f"{TAG}h1"]
ADDRESSES = ["10.77.0.1", "10.77.0.2"]


def sh(*args, check=True, timeout=30):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {p.returncode}: {p.stderr.strip()}")
    return p


def make_hosts():
    for ns in NAMESPACES:
        sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", "eth0", "netns", NAMESPACES[0], "type", "veth", "peer", "name", "eth0", "netns", NAMESPACES[1])
    for ns, address in zip(NAMESPACES, ADDRESSES):
        sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def kill_namespace_processes():
    for ns in NAMESPACES:
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def remove_hosts():
    kill_namespace_processes()
    for ns in NAMESPACES:
        sh("ip", "netns", "del", ns, check=False)


def set_link(host, up):
    sh("ip", "-n", NAMESPACES[host], "link", "set", "eth0", "up" if up else "down")


def config(path, ckpt_dir, global_batch=8):
    cfg = {"model": {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "intermediate_size": 64, "max_position_embeddings": 32},
           "train": {"micro_batch": 4, "global_batch": global_batch, "steps": STEPS, "lr": 0.01, "threads": 1,
                     "log_every": 1000},
           "data": {"max_seq_length": 32, "max_predictions_per_seq": 4},
           "checkpoint": {"dir": str(ckpt_dir), "every": EVERY, "keep": 100},
           "dist": {"timeout_s": TIMEOUT_S}}
    os.makedirs(ckpt_dir, exist_ok=True)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def weights(path):
    with h5py.File(path, "r") as f:
        out = {}
        f["model"].visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
        return out


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


class Cluster:
    """mpirun started in host 0's namespace; ranks write their output to out_dir/rank<N>.log."""

    def __init__(self, tmp, mpirun):
        self.tmp, self.mpirun = tmp, mpirun
        self.agent = os.path.join(tmp, "netns_agent.sh")
        with open(self.agent, "w") as f:
            f.write("#!/bin/sh\n# Open MPI's launch agent: 'AGENT HOST COMMAND...' runs COMMAND in HOST's namespace.\n"
                    "host=$1; shift\ncase \"$host\" in\n")
            for ns, address in zip(NAMESPACES, ADDRESSES):
                f.write(f"  {address}) ns={ns} ;;\n")
            f.write("  *) echo \"netns agent: unknown host $host\" >&2; exit 1 ;;\nesac\n"
                    "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n")
        os.chmod(self.agent, 0o755)

    def start(self, out_dir, program, *args):
        os.makedirs(out_dir, exist_ok=True)
        # Each rank writes its own output: host 1's cannot reach mpirun once its link is cut.
        rank_cmd = f'exec "$0" "$@" > {out_dir}/rank$OMPI_COMM_WORLD_RANK.log 2>&1'
        cmd = ["ip", "netns", "exec", NAMESPACES[0], self.mpirun, "--allow-run-as-root",
               "--host", ",".join(f"{a}:1" for a in ADDRESSES), "-np", "2",
               "--mca", "plm_rsh_agent", self.agent, "--mca", "plm_rsh_no_tree_spawn", "1",
               "--mca", "oob_tcp_if_include", "10.77.0.0/24", "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "10.77.0.0/24", "--mca", "orte_allowed_exit_without_sync", "1",
               "sh", "-c", rank_cmd, program, *map(str, args)]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                start_new_session=True)

    def run(self, out_dir, program, *args, timeout=300):
        p = self.start(out_dir, program, *args)
        out, _ = p.communicate(timeout=timeout)
        logs = "".join(open(os.path.join(out_dir, f)).read() for f in sorted(os.listdir(out_dir)))
        if p.returncode != 0:
            raise AssertionError(f"two-host run exited {p.returncode}\n{out}\n{logs}")
        return logs


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    train = os.path.join(sys.argv[1], "src", "tools", "bert-train")
    mpirun = shutil.which("mpirun")
    if not os.path.exists(train) or mpirun is None:
        print(f"skipped: needs {train} and mpirun")
        return SKIP
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("skipped: network namespaces need root (CAP_NET_ADMIN) and iproute2's ip")
        return SKIP
    try:
        make_hosts()
    except (RuntimeError, OSError) as e:
        remove_hosts()
        print(f"skipped: cannot make network namespaces here: {e}")
        return SKIP
    for sig in (signal.SIGTERM, signal.SIGINT):  # meson's timeout: clean up first
        signal.signal(sig, lambda *_: sys.exit(1))
    tmp = tempfile.mkdtemp(prefix="two_hosts_")
    try:
        return scenario(tmp, Cluster(tmp, mpirun), sys.argv[1], train, mpirun)
    finally:
        remove_hosts()
        shutil.rmtree(tmp, ignore_errors=True)


def scenario(tmp, cluster, build, train, mpirun):
    t = lambda *p: os.path.join(tmp, *p)
    logs = cluster.run(t("equivalence_out"), os.path.join(build, "tests", "dist", "dist_training"))
    passed = logs.count("[  PASSED  ]")
    assert passed == 2, logs
    tests = re.search(r"PASSED  \] (\d+) tests", logs).group(1)
    print(f"dist_training across the two hosts: {tests} tests passed on both ranks (two ranks equal one process)")

    # bert-train across them against the same two ranks without namespaces.
    subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "btl", "tcp,self",
                    train, config(t("local.json"), t("local")), "--quiet"], check=True, capture_output=True)

    t0 = time.monotonic()
    cluster.run(t("straight_out"), train, config(t("straight.json"), t("straight")), "--quiet")
    straight_s = time.monotonic() - t0
    local, straight = (weights(t(d, "final.h5")) for d in ("local", "straight"))
    assert all(np.array_equal(straight[k], local[k]) for k in local), "two hosts differ from two local ranks"
    print(f"bert-train across the two hosts: {STEPS} steps in {straight_s:.1f} s, final weights bit-identical "
          "to two ranks without namespaces")

    # Cut host 1's link once the run has written checkpoints past step 2 * EVERY.
    cut_cfg = config(t("cut.json"), t("cut"))
    proc = cluster.start(t("cut_out"), train, cut_cfg, "--quiet")
    deadline = time.monotonic() + 120
    while not os.path.exists(t("cut", f"ckpt_{2 * EVERY}.h5")):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended or stalled before its checkpoints"
        time.sleep(0.01)
    before = {f: digest(t("cut", f)) for f in os.listdir(t("cut")) if f.endswith(".h5")}
    set_link(1, up=False)
    cut_at = time.monotonic()
    seen = {}
    while len(seen) < 2 and time.monotonic() < cut_at + TIMEOUT_S + 30:
        for rank in (0, 1):
            path = t("cut_out", f"rank{rank}.log")
            if rank not in seen and os.path.exists(path) and "BERT_ERR_DISTRIBUTED" in open(path).read():
                seen[rank] = time.monotonic() - cut_at
        time.sleep(0.02)
    for rank in (0, 1):
        print(f"rank {rank} ({ADDRESSES[rank]}): "
              + (f"BERT_ERR_DISTRIBUTED {seen[rank]:.2f} s after the link was cut" if rank in seen else "no error seen"))
    kill_namespace_processes()  # mpirun cannot reach host 1's daemon to end the job
    proc.wait(timeout=30)
    logs = {r: open(t("cut_out", f"rank{r}.log")).read() for r in (0, 1)}
    for rank, log in logs.items():
        print(f"rank {rank}: " + next((line for line in log.splitlines() if "BERT_ERR_DISTRIBUTED" in line), "(none)"))
    assert set(seen) == {0, 1}, logs
    for rank, seconds in seen.items():
        assert seconds <= TIMEOUT_S + 3.0, f"rank {rank} took {seconds:.2f} s (dist.timeout_s {TIMEOUT_S})"
        # each side names the rank it lost (the roll call after the timeout gets no answer across the cut)
        assert f"rank {1 - rank} did not answer a roll call" in logs[rank], logs[rank]
    assert all(digest(t("cut", f)) == d for f, d in before.items()), "a checkpoint changed after the cut"
    last = max(int(f[5:-3]) for f in os.listdir(t("cut")) if f.startswith("ckpt_") and f.endswith(".h5"))
    assert not os.path.exists(t("cut", "final.h5"))

    # The surviving host alone: a restart at the remaining world size continues from the same
    # checkpoint (the data cursor rescaled to one rank, the global batch kept by accumulation).
    shutil.copytree(t("cut"), t("one_host"))
    started = time.monotonic()
    p = subprocess.run([train, config(t("one_host.json"), t("one_host")), "--resume", "--quiet"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and f"resumed from step {last}" in p.stdout, p.stdout + p.stderr
    assert os.path.exists(t("one_host", "final.h5"))
    print(f"resumed from ckpt_{last}.h5 on the surviving host alone (2 ranks -> 1): {STEPS} steps done in "
          f"{time.monotonic() - started:.1f} s, final.h5 written")

    # The link back: the run resumes from its newest checkpoint and ends where the straight run did.
    set_link(1, up=True)
    logs = cluster.run(t("resume_out"), train, cut_cfg, "--resume", "--quiet")
    assert f"resumed from step {last}" in logs, logs
    resumed = weights(t("cut", "final.h5"))
    assert all(np.array_equal(resumed[k], straight[k]) for k in straight), "resumed weights differ"
    print(f"resumed from ckpt_{last}.h5 with the link back: final weights bit-identical to the uninterrupted run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
