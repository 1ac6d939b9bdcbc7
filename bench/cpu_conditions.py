"""The conditions of a CPU comparison, the same for every engine (bench/compare_torch.py,
bench/compare_encode.py): which cores, how many threads, the machine's load during each round,
and how a round's figures become the printed median and spread. Needs only the standard library.

Pinning: "N threads" means N cores for everyone. The cores are the first N this process may
run on (or --cores). Every thread of the Python process (PyTorch's and ONNX Runtime's pools
included, whenever they were started) is pinned to them, and so is every engine subprocess
(through the affinity it inherits, and `taskset` in its command line for anyone who copies it).
The engine's own helper thread (encode tokenizes the next batch while the model runs the
current one) runs on those same cores: it is counted, not given a core of its own.

Threads: OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS and GC_NUM_THREADS are N for
every process; PyTorch's intra-op threads are N and its inter-op threads 1; ONNX Runtime's
intra-op N and inter-op 1 (sequential execution).

Load: before each round /proc/loadavg, and over the round, from /proc/stat and the process
times, the CPU time the other processes of the machine took, in all and on the pinned cores.
After each thread count a verdict: quiet when the others took at most QUIET_LIMIT of a core
on the pinned cores in every round; otherwise the figures are not ones to quote.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GC_NUM_THREADS")
# The cores this process may run on, read before any pinning narrows them.
ALLOWED_CORES = sorted(os.sched_getaffinity(0))


def parse_cores(text):
    """'0,2-3' -> [0, 2, 3]."""
    cores = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        cores += range(int(first), int(last or first) + 1)
    return sorted(set(cores))


def choose_cores(threads, cores_text=None):
    """The cores a run of `threads` threads is pinned to: --cores' first `threads`, else this
    process's allowed cores' first `threads`. Exits with a message when there are too few."""
    wanted = parse_cores(cores_text) if cores_text else ALLOWED_CORES
    outside = [core for core in wanted if core not in ALLOWED_CORES]
    if outside:
        sys.exit(f"cpu_conditions: cores {outside} are not among this process's allowed cores {ALLOWED_CORES}")
    if len(wanted) < threads:
        sys.exit(f"cpu_conditions: {threads} threads need {threads} cores, only {wanted} are given")
    return wanted[:threads]


def thread_environment(threads, base=None):
    """The environment of a process of `threads` threads (the BLAS and OpenMP pools' sizes)."""
    env = dict(os.environ if base is None else base)
    for variable in THREAD_VARIABLES:
        env[variable] = str(threads)
    return env


def pin_process(cores):
    """Pins every thread of this process to `cores` (a thread pool started earlier keeps the
    affinity it was created with otherwise), and the environment's thread counts follow."""
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), cores)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    os.environ.update(thread_environment(len(cores), {}))


def unpinned_threads(cores):
    """The threads of this process not pinned to exactly `cores` (none after pin_process)."""
    wrong = []
    for task in os.listdir("/proc/self/task"):
        try:
            if os.sched_getaffinity(int(task)) != set(cores):
                wrong.append(int(task))
        except ProcessLookupError:
            pass
    return wrong


def pin_and_verify(cores):
    """pin_process, then checks that every thread, and one started after it, runs on exactly
    `cores`; exits with a message otherwise."""
    pin_process(cores)
    seen = []
    later = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
    later.start()
    later.join()
    if unpinned_threads(cores) or seen != [set(cores)]:
        sys.exit(f"cpu_conditions: pinning to {cores} did not reach every thread")


def pinned_command(command, cores):
    """`command` under taskset on `cores` (the same affinity it would inherit, stated)."""
    return ["taskset", "-c", ",".join(map(str, cores))] + list(command)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def conditions(threads, cores, versions):
    """The header's facts, as a dict (the JSON's "conditions")."""
    return {"cpu": cpu_model(), "online_cpus": os.cpu_count(), "threads": threads, "cores": cores,
            "host": platform.node(), "python": platform.python_version(), "versions": versions,
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def conditions_line(facts):
    versions = ", ".join(f"{name} {version}" for name, version in facts["versions"].items())
    return (f"{facts['cpu']} ({facts['online_cpus']} online CPUs); {facts['threads']} thread(s) on core(s) "
            f"{','.join(map(str, facts['cores']))} for every engine, helper threads included; {versions}")


def _cpu_jiffies():
    """{cpu index: busy jiffies} and the all-CPU busy jiffies, from /proc/stat."""
    per_cpu, total = {}, 0
    with open("/proc/stat") as stat:
        for line in stat:
            if not line.startswith("cpu"):
                break
            name, *fields = line.split()
            values = [int(v) for v in fields[:8]]
            busy = sum(values) - values[3] - values[4]  # all but idle and iowait
            if name == "cpu":
                total = busy
            else:
                per_cpu[int(name[3:])] = busy
    return per_cpu, total


def _own_seconds():
    """CPU seconds of this process and of its waited-for children."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class RoundLoad:
    """The load of one round: `with RoundLoad(cores) as load:` around the round, then
    load.result(). The other processes' share is the machine's busy time less this process's
    and its children's (which run on the pinned cores only)."""

    def __init__(self, cores):
        self.cores = cores
        self.hertz = os.sysconf("SC_CLK_TCK")

    def __enter__(self):
        with open("/proc/loadavg") as loadavg:
            self.loadavg = [float(v) for v in loadavg.read().split()[:3]]
        self.start = (time.monotonic(), _own_seconds(), *_cpu_jiffies())
        return self

    def __exit__(self, *exception):
        self.end = (time.monotonic(), _own_seconds(), *_cpu_jiffies())
        return False

    def result(self):
        (t0, own0, per0, all0), (t1, own1, per1, all1) = self.start, self.end
        wall = max(t1 - t0, 1e-9)
        own = own1 - own0
        on_cores = sum(per1[c] - per0[c] for c in self.cores) / self.hertz
        return {"loadavg_1m": self.loadavg[0], "loadavg": self.loadavg, "seconds": round(wall, 3),
                # in cores: 1.0 is one CPU kept busy for the whole round by someone else
                "others_cores": round(max((all1 - all0) / self.hertz - own, 0) / wall, 2),
                "others_on_pinned_cores": round(max(on_cores - own, 0) / wall, 2)}


def load_text(load):
    return (f"load {load['loadavg_1m']:.2f}, others {load['others_cores']:.2f} cores "
            f"({load['others_on_pinned_cores']:.2f} on ours)")


# Other processes' CPU on the pinned cores (in cores, averaged over a round) above which a
# round's figures measure the machine's load more than the engines.
QUIET_LIMIT = 0.1


def quiet_verdict(loads):
    """One line on whether the rounds ran on quiet cores, from their RoundLoad results."""
    worst = max(load["others_on_pinned_cores"] for load in loads)
    if worst <= QUIET_LIMIT:
        return f"quiet: other processes took at most {worst:.2f} of a core on the pinned cores in any round"
    return (f"NOT QUIET: other processes took up to {worst:.2f} cores on the pinned cores in a round (over "
            f"{QUIET_LIMIT}): these figures measure the machine's load; rerun on a quiet machine before quoting them")


def summary(figures):
    """The printed figure of several rounds' figures: the median, and the spread min-max."""
    return {"median": statistics.median(figures), "min": min(figures), "max": max(figures), "rounds": list(figures)}


def round_order(names, round_index):
    """Who runs first in a round: the list rotated by one each round, so that a change in the
    machine's load falls on each engine in turn."""
    shift = round_index % len(names)
    return names[shift:] + names[:shift]


def paragraph(doc, start):
    """The paragraph of a docstring that begins with `start`, on one line (the JSON's rule)."""
    return next(p for p in doc.split("\n\n") if p.startswith(start)).replace("\n", " ")


def write_json(path, document):
    with open(path, "w") as out:
        json.dump(document, out, indent=1)
        out.write("\n")


def module_versions(names):
    """{name: version} of the importable modules among `names` (imports them)."""
    versions = {}
    for name in names:
        try:
            module = __import__(name)
            versions[name] = getattr(module, "__version__", "?")
        except ImportError:
            pass
    return versions


def run_checked(command, env):
    """A subprocess's stdout; exits with its stderr when it fails."""
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout
