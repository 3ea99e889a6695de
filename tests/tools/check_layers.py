#!/usr/bin/env python3
"""The layer rule: a file includes only headers of its own layer or of a lower one.

usage: check_layers.py [REPOSITORY]   (default: the repository this script is in)

Every quoted #include of src/ and include/mirrored/ (public headers, sources and private
headers alike) is resolved to the file it names: "mirrored/<path>" to include/mirrored/<path>,
anything else relative to the including file's folder. A file's layer is the longest entry of
LAYERS that is a prefix of its path below src/ or include/mirrored/; an include whose layer
comes later in LAYERS than the includer's is a violation, printed as
    path:line: includes "header" (layer of header, above layer of path)
Every file must belong to a layer, so a new folder is placed in the order before it is used.
Exit status: 0 when no file breaks the rule, 1 otherwise (with every violation printed).
"""
import os
import re
import sys

# From the bottom up. An entry is a folder (it holds its subfolders unless they have an entry
# of their own) or, for comm/communicator.h, one file.
LAYERS = [
    "core",  # Tensor, Device, errors, logging, RNG, timers, process
    "kernels",  # the op set; cpu/ and cuda/ implementations
    "nn",
    "optim",
    "io",  # file formats
    "data",  # datasets, importers, sampling
    # The Communicator interface and its value types (DataType, ReduceOp, Work): what the
    # failure and health code speak about collectives.
    "comm/communicator.h",
    # ULFM primitives (PeerFailure, revoke, shrink, agree), MPI error checks, the runtime-loss
    # bookkeeping and abort_job: what a failure is, below everything that meets one.
    "comm/failure",
    # The collective watchdog, flight recorder and verdicts: the backends' collectives run
    # under the watchdog, so it sits below them.
    "comm/health",
    "comm",  # the backends (mpi, nccl, hierarchical, local), mean, exact sum, MPI types and tuning
    "runtime",  # starting a job: MPI init, cluster, launcher, core binding, device choice
    "distribute",  # the strategy, plans, reducer, distributed model and datasets
    "config",  # TrainConfig, the option table, factories, run set-up
    "checkpoint",  # where checkpoints live, the saved model, init_from, GPT-2 weights, run directory
    "train",  # the Trainer, train_step, evaluate, callbacks, training data
    "elastic",  # recovery after a lost peer (on_failure = shrink), above the Trainer it restarts
    "app",  # run_training: the composition
    "cli",  # the commands; cli/bench/ the benchmark drivers
]
# Outside the layers: the umbrella header includes from any of them for library users.
UNLAYERED = {"mirrored.h"}

ROOTS = ("src", "include/mirrored")
SOURCE = re.compile(r"\.(h|cpp|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(path):
    """Index in LAYERS of `path` (relative to src/ or include/mirrored/), or None."""
    best = None
    for index, entry in enumerate(LAYERS):
        if path == entry or path.startswith(entry + "/"):
            if best is None or len(entry) > len(LAYERS[best]):
                best = index
    return best


def relative_to_roots(repo, absolute):
    for root in ROOTS:
        base = os.path.join(repo, root) + os.sep
        if absolute.startswith(base):
            return absolute[len(base):]
    return None


def check(repo):
    problems = []
    for root in ROOTS:
        for folder, _, names in os.walk(os.path.join(repo, root)):
            for name in sorted(names):
                if not SOURCE.search(name):
                    continue
                absolute = os.path.join(folder, name)
                path = relative_to_roots(repo, absolute)
                shown = os.path.relpath(absolute, repo)
                if path in UNLAYERED:
                    continue
                mine = layer_of(path)
                if mine is None:
                    problems.append(f"{shown}: in no layer; add its folder to LAYERS in {sys.argv[0]}")
                    continue
                with open(absolute, encoding="utf-8") as text:
                    for number, line in enumerate(text, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        header = match.group(1)
                        if header.startswith("mirrored/"):
                            target = header[len("mirrored/"):]
                        else:
                            target = relative_to_roots(repo, os.path.normpath(os.path.join(folder, header)))
                        if target is None or target in UNLAYERED:
                            continue
                        theirs = layer_of(target)
                        if theirs is not None and theirs > mine:
                            problems.append(f'{shown}:{number}: includes "{header}" ({LAYERS[theirs]}, above '
                                            f"{LAYERS[mine]})")
    return problems


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    if not os.path.isdir(os.path.join(repo, "src")):
        print(f"check_layers: no src/ in '{repo}'", file=sys.stderr)
        return 2
    problems = check(repo)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} problem(s); the layers, lowest first: {' < '.join(LAYERS)}")
        return 1
    print(f"check_layers: no layer includes a higher one ({' < '.join(LAYERS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
