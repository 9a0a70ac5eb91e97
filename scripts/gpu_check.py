#!/usr/bin/env python3
"""Gantry on a real NVIDIA GPU: the checks behind `scripts/gpu-check` (issue 19).

Owns: reading what the driver says (`nvidia-smi` output, parsed here), starting a
throw-away `gantry serve` with NVML on, submitting probe jobs to it over its Unix
socket, comparing what Gantry reports and what the jobs saw with the driver's answers,
and printing one `PASS name: detail` / `FAIL name: detail` / `SKIP name: why` line per
check and a summary. Also the probe that runs *inside* the jobs (`probe` subcommand:
this file is copied where the job's user can read it).

Does not own: building Gantry and the work directory's last-resort removal
(`scripts/gpu-check`), the self-test (`scripts/gpu_check_test.py`, with sample outputs in
`scripts/gpu-check-fixtures/`). Python 3 standard library only. Not part of CI.

Layout of this file: parsers (pure) -> comparisons (pure, each returns `Check`s) ->
probe (runs in a job) -> the live run (daemon, API client, jobs) -> command line.
The parsers and comparisons are what `--self-test` exercises.

JSON shapes relied on (read from the Rust sources, not from a spec):
  GET /v1/nodes     -> [NodeView]    host/controller/src/node_view.rs (NodeView, GpuView)
  GET /v1/jobs/{id} -> JobRecord     host/server/src/model/record.rs (state, tasks[].gpus[{index, milli}])
  GET /v1/accounting-> AccountingReport host/server/src/api/accounting.rs + store/accounting.rs
  GET /v1/health    -> {"status", "isolation": {"cgroups", "run_as_user", ...}}  api/mod.rs
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import errno
import http.client
import io
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

GROUPS_LABEL = "gantry.io/gpu-groups"  # inventory/groups.rs GPU_GROUPS_LABEL
NVIDIA_MAJOR = 195  # character-device major of /dev/nvidia<N>
EPERM = errno.EPERM
RESULT_MARK = "GPUCHECK-RESULT "
READY_MARK = "GPUCHECK-READY "
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------


@dataclass
class Check:
    """One line of the report."""

    status: str  # PASS, FAIL or SKIP
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.status} {self.name}: {self.detail}"


def passed(name: str, detail: str) -> Check:
    return Check("PASS", name, detail)


def failed(name: str, detail: str) -> Check:
    return Check("FAIL", name, detail)


def skipped(name: str, why: str) -> Check:
    return Check("SKIP", name, why)


def verdict(name: str, problems: Sequence[str], ok_detail: str) -> Check:
    """PASS with `ok_detail` when there are no problems, else FAIL listing them."""
    if problems:
        return failed(name, "; ".join(problems))
    return passed(name, ok_detail)


# ---------------------------------------------------------------------------------------
# Parsers of nvidia-smi output (pure)
# ---------------------------------------------------------------------------------------


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def normalize_bus_id(raw: str) -> str:
    """A PCI bus id in one spelling: lowercase with a 4-digit domain, as
    `inventory::groups::normalize_bus_id` does (`00000000:1B:00.0` -> `0000:1b:00.0`)."""
    text = raw.strip().lower()
    if ":" not in text:
        return text
    domain, rest = text.split(":", 1)
    try:
        d = int(domain, 16)
    except ValueError:
        return text
    return f"{d:04x}:{rest}" if ":" in rest else text


def _na(value: str) -> bool:
    v = value.strip()
    return v == "" or v.startswith("[") or v.upper() in ("N/A", "NOT SUPPORTED")


def _int_or_none(value: str) -> Optional[int]:
    if _na(value):
        return None
    try:
        return int(float(value.strip()))
    except ValueError:
        return None


def parse_query_gpu(text: str) -> List[dict]:
    """`nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id
    --format=csv,noheader,nounits` -> [{index, uuid, name, memory_mib, bus_id}]."""
    gpus = []
    for row in csv.reader(io.StringIO(strip_ansi(text)), skipinitialspace=True):
        if not row or not row[0].strip():
            continue
        if len(row) < 5:
            raise ValueError(f"query-gpu line has {len(row)} fields, expected 5: {row}")
        index, uuid, name, memory, bus = (c.strip() for c in row[:5])
        gpus.append(
            {
                "index": int(index),
                "uuid": uuid,
                "name": name,
                "memory_mib": _int_or_none(memory),
                "bus_id": bus,
            }
        )
    gpus.sort(key=lambda g: g["index"])
    return gpus


def parse_topo(text: str) -> Dict[int, Dict[int, str]]:
    """`nvidia-smi topo -m` -> {gpu: {other gpu: link}} for the GPU rows and columns of
    the matrix (`X`, `NV18`, `PXB`, `PHB`, `NODE`, `SYS`...). NIC rows and columns, the
    affinity columns and the legend are ignored; ANSI underline codes are stripped."""
    lines = [strip_ansi(l) for l in text.splitlines()]
    # The header row starts with blanks and names the columns (`\tGPU0\tGPU1\t...`);
    # every matrix row starts with its own name (`GPU0\t X \tNV18...`).
    header = next(
        (
            i
            for i, l in enumerate(lines)
            if l[:1].isspace() and re.fullmatch(r"GPU\d+", (l.split() or [""])[0])
        ),
        None,
    )
    if header is None:
        raise ValueError("no GPU header line in nvidia-smi topo -m output")
    columns: List[int] = []
    for t in lines[header].split():
        m = re.fullmatch(r"GPU(\d+)", t)
        if not m:
            break
        columns.append(int(m.group(1)))
    matrix: Dict[int, Dict[int, str]] = {}
    for line in lines[header + 1 :]:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].startswith("Legend"):
            break
        m = re.fullmatch(r"GPU(\d+)", tokens[0])
        if not m:
            continue
        cells = tokens[1 : 1 + len(columns)]
        if len(cells) < len(columns):
            raise ValueError(f"short topo -m row: {line!r}")
        matrix[int(m.group(1))] = dict(zip(columns, cells))
    return matrix


def is_nvlink(cell: str) -> bool:
    return re.fullmatch(r"NV\d+", cell.strip()) is not None


def topo_peers(matrix: Dict[int, Dict[int, str]]) -> Dict[int, List[int]]:
    """The GPUs each GPU reaches over NVLink (an `NV#` cell), sorted."""
    return {
        g: sorted(o for o, cell in row.items() if o != g and is_nvlink(cell)) for g, row in matrix.items()
    }


def components(indices: Iterable[int], edges: Iterable[Tuple[int, int]]) -> List[List[int]]:
    """Connected components, each sorted, ordered by their lowest member."""
    parent = {i: i for i in indices}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in edges:
        if a in parent and b in parent:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: Dict[int, List[int]] = {}
    for i in parent:
        groups.setdefault(root(i), []).append(i)
    return sorted(sorted(g) for g in groups.values())


def topo_groups(matrix: Dict[int, Dict[int, str]]) -> List[List[int]]:
    """GPU groups: connected components of the NV# links (what Gantry computes from
    NVML's links, inventory/groups.rs `nvlink_groups`)."""
    edges = [(g, o) for g, peers in topo_peers(matrix).items() for o in peers]
    return components(matrix.keys(), edges)


def parse_groups_label(label: str) -> List[List[int]]:
    """The `gantry.io/gpu-groups` value (`0-7`, `0-3|4-7`, `0,2|1,3|4`) as sorted groups."""
    groups = []
    for part in label.split("|"):
        members: List[int] = []
        for item in part.split(","):
            item = item.strip()
            if not item:
                continue
            if "-" in item:
                a, b = item.split("-", 1)
                members.extend(range(int(a), int(b) + 1))
            else:
                members.append(int(item))
        if members:
            groups.append(sorted(set(members)))
    return sorted(groups)


def parse_gpu_list(text: str) -> Dict[int, dict]:
    """`nvidia-smi -L` -> {index: {name, uuid, mig: [{profile, device, uuid}]}}. MIG
    lines follow their GPU: `  MIG 1g.5gb Device 0: (UUID: MIG-<uuid>)`, or with drivers
    before R470 `(UUID: MIG-GPU-<uuid>/<gi>/<ci>)`."""
    gpus: Dict[int, dict] = {}
    current = None
    for line in strip_ansi(text).splitlines():
        m = re.match(r"^GPU (\d+): (.*?) \(UUID: ([^)]+)\)", line)
        if m:
            current = int(m.group(1))
            gpus[current] = {"name": m.group(2).strip(), "uuid": m.group(3).strip(), "mig": []}
            continue
        m = re.match(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)", line)
        if m and current is not None:
            gpus[current]["mig"].append(
                {"profile": m.group(1), "device": int(m.group(2)), "uuid": m.group(3).strip()}
            )
    return gpus


def parse_index_value_csv(text: str) -> Dict[int, List[str]]:
    """`index, a, b, ...` lines (`--format=csv,noheader,nounits`) -> {index: [a, b, ...]}."""
    out: Dict[int, List[str]] = {}
    for row in csv.reader(io.StringIO(strip_ansi(text)), skipinitialspace=True):
        if row and row[0].strip().isdigit():
            out[int(row[0])] = [c.strip() for c in row[1:]]
    return out


def parse_mig_mode(text: str) -> Dict[int, Optional[bool]]:
    """`--query-gpu=index,mig.mode.current` -> {index: True/False, None when N/A}."""
    out: Dict[int, Optional[bool]] = {}
    for index, values in parse_index_value_csv(text).items():
        v = values[0] if values else ""
        out[index] = None if _na(v) else v.lower() == "enabled"
    return out


def parse_health(text: str) -> Dict[int, dict]:
    """`--query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending`
    -> {index: {ecc: int|None, pending: bool|None}}: the signals health.rs judges (None:
    the GPU does not report it, e.g. no ECC, or row remapping instead of retirement)."""
    out: Dict[int, dict] = {}
    for index, values in parse_index_value_csv(text).items():
        ecc = _int_or_none(values[0]) if values else None
        pend = values[1] if len(values) > 1 else ""
        out[index] = {"ecc": ecc, "pending": None if _na(pend) else pend.lower() in ("yes", "true")}
    return out


def parse_minor_numbers(text: str) -> Dict[str, int]:
    """`nvidia-smi -q` -> {normalised bus id: Minor Number} (the N of /dev/nvidiaN)."""
    out: Dict[str, int] = {}
    bus = None
    for line in strip_ansi(text).splitlines():
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", line)
        if m:
            bus = normalize_bus_id(m.group(1))
            continue
        m = re.match(r"^\s+Minor Number\s*:\s*(\d+)", line)
        if m and bus is not None:
            out[bus] = int(m.group(1))
    return out


def parse_versions(text: str) -> Dict[str, str]:
    """The plain `nvidia-smi` banner -> {driver, cuda} (what is found)."""
    out = {}
    m = re.search(r"Driver Version\s*:\s*([0-9.]+)", text)
    if m:
        out["driver"] = m.group(1)
    m = re.search(r"CUDA Version\s*:\s*([0-9.]+)", text)
    if m:
        out["cuda"] = m.group(1)
    return out


def parse_compute_apps(text: str) -> List[dict]:
    """`--query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits`."""
    apps = []
    for row in csv.reader(io.StringIO(strip_ansi(text)), skipinitialspace=True):
        if len(row) >= 2 and row[0].strip().isdigit():
            apps.append(
                {
                    "pid": int(row[0]),
                    "gpu_uuid": row[1].strip(),
                    "used_mib": _int_or_none(row[2]) if len(row) > 2 else None,
                }
            )
    return apps


def parse_cuda_binary_output(text: str) -> dict:
    """What the nvcc-built probe printed (`count=N`, `device=I uuid=GPU-... name=...`,
    `kernel=ok`, or `error=...`) -> {count, devices: [{uuid, name}], work, error}."""
    out: dict = {"count": None, "devices": [], "work": None, "error": None}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("count="):
            out["count"] = int(line[len("count=") :])
        elif line.startswith("device="):
            m = re.match(r"device=(\d+) uuid=(\S+) name=(.*)$", line)
            if m:
                out["devices"].append({"uuid": m.group(2), "name": m.group(3).strip()})
        elif line.startswith("kernel="):
            out["work"] = line[len("kernel=") :]
        elif line.startswith("error="):
            out["error"] = line[len("error=") :]
    return out


def uuid_hex(uuid: str) -> str:
    """The 32 hex digits of a GPU or MIG UUID (`GPU-…`, `MIG-…`), for comparing what CUDA
    formats from bytes with what NVML prints."""
    text = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text.replace("-", "")


def job_result(log_text: str, mark: str = RESULT_MARK) -> Optional[dict]:
    """The last `mark {json}` line a probe printed, or None."""
    found = None
    for line in log_text.splitlines():
        if line.startswith(mark):
            try:
                found = json.loads(line[len(mark) :])
            except ValueError:
                pass
    return found


# ---------------------------------------------------------------------------------------
# Comparisons (pure): driver's answers vs Gantry's, and what the jobs saw
# ---------------------------------------------------------------------------------------


def local_node(nodes: List[dict]) -> dict:
    """The daemon's own node in `GET /v1/nodes` (`agent: "local"`)."""
    for n in nodes:
        if n.get("agent") == "local":
            return n
    if len(nodes) == 1:
        return nodes[0]
    raise ValueError(f"no local node among {[n.get('name') for n in nodes]}")


def compare_inventory(smi: List[dict], node: dict, memory_tolerance_mib: int = 1) -> List[Check]:
    """`inventory-source` and `inventory-gpus`: same indices, UUIDs, models, memory
    (within rounding: Gantry has NVML bytes >> 20, nvidia-smi MiB) and bus ids."""
    checks = []
    source = node.get("gpu_source")
    checks.append(
        verdict(
            "inventory-source",
            (
                []
                if source == "nvml"
                else [f'gpu_source is {source!r}, not "nvml" (see the daemon log for why NVML was not used)']
            ),
            f"node {node.get('name')} takes its GPUs from NVML",
        )
    )
    gantry = {g["index"]: g for g in node.get("gpus", [])}
    driver = {g["index"]: g for g in smi}
    problems = []
    if len(gantry) != len(driver):
        problems.append(f"Gantry lists {len(gantry)} GPUs, nvidia-smi {len(driver)}")
    for i in sorted(set(gantry) | set(driver)):
        if i not in gantry:
            problems.append(f"GPU {i} ({driver[i]['uuid']}) is missing from Gantry")
            continue
        if i not in driver:
            problems.append(f"Gantry lists GPU {i} ({gantry[i].get('uuid')}), nvidia-smi does not")
            continue
        g, d = gantry[i], driver[i]
        if (g.get("uuid") or "") != d["uuid"]:
            problems.append(f"GPU {i} UUID: Gantry {g.get('uuid')}, nvidia-smi {d['uuid']}")
        if g.get("model") != d["name"]:
            problems.append(f"GPU {i} model: Gantry {g.get('model')!r}, nvidia-smi {d['name']!r}")
        if (
            d["memory_mib"] is not None
            and abs(int(g.get("memory_mib") or 0) - d["memory_mib"]) > memory_tolerance_mib
        ):
            problems.append(
                f"GPU {i} memory: Gantry {g.get('memory_mib')} MiB, nvidia-smi {d['memory_mib']} MiB"
            )
        gb = normalize_bus_id(g.get("pci_bus_id") or "")
        if gb != normalize_bus_id(d["bus_id"]):
            problems.append(f"GPU {i} bus id: Gantry {g.get('pci_bus_id')}, nvidia-smi {d['bus_id']}")
    models = sorted({d["name"] for d in smi})
    checks.append(
        verdict(
            "inventory-gpus",
            problems,
            f"{len(smi)} GPU(s) ({', '.join(models)}): same indices, UUIDs, models, memory "
            f"(±{memory_tolerance_mib} MiB) and bus ids as nvidia-smi",
        )
    )
    return checks


def gantry_groups(node: dict) -> Tuple[List[List[int]], str]:
    """Gantry's GPU groups: the label when set, else every GPU alone (the label is left out
    when no group has two GPUs, inventory/groups.rs `groups_label`)."""
    label = (node.get("labels") or {}).get(GROUPS_LABEL)
    indices = [g["index"] for g in node.get("gpus", [])]
    if label is None:
        return sorted([i] for i in indices), "no label"
    return parse_groups_label(label), f"label {label}"


def compare_topology(matrix: Dict[int, Dict[int, str]], node: dict) -> List[Check]:
    """`nvlink-groups` (the label vs the NV# components of `topo -m`) and `nvlink-peers`
    (each GPU's `nvlink_peers` vs its NV# cells)."""
    want = topo_groups(matrix)
    have, said = gantry_groups(node)
    links = sorted({c for row in matrix.values() for o, c in row.items() if is_nvlink(c)})
    shown = "|".join(",".join(map(str, g)) for g in want)
    checks = [
        verdict(
            "nvlink-groups",
            [] if have == want else [f"Gantry's groups {have} ({said}), topo -m gives {want}"],
            f"{said} = topo -m groups {shown}"
            + (f" (links {', '.join(links)})" if links else " (no NVLink: every GPU alone)"),
        )
    ]
    peers = topo_peers(matrix)
    problems = []
    for g in node.get("gpus", []):
        i = g["index"]
        if i not in peers:
            problems.append(f"GPU {i} is not in topo -m")
            continue
        if sorted(g.get("nvlink_peers") or []) != peers[i]:
            problems.append(
                f"GPU {i} peers: Gantry {sorted(g.get('nvlink_peers') or [])}, topo -m {peers[i]}"
            )
    linked = sum(1 for p in peers.values() if p)
    checks.append(
        verdict(
            "nvlink-peers",
            problems,
            f"every GPU's nvlink_peers match topo -m ({linked} GPU(s) with NVLink peers)",
        )
    )
    return checks


def compare_mig(listed: Dict[int, dict], mig_mode: Dict[int, Optional[bool]], node: dict) -> Check:
    """`mig-devices`: per GPU, MIG mode and the MIG devices (UUID, profile) of
    `nvidia-smi -L` equal the node view's `mig_enabled` / `mig_devices`; SKIP when MIG is
    off everywhere."""
    any_mig = any(g["mig"] for g in listed.values()) or any(v for v in mig_mode.values())
    if not any_mig:
        return skipped("mig-devices", "MIG is off on every GPU (nvidia-smi -L shows no MIG lines)")
    gantry = {g["index"]: g for g in node.get("gpus", [])}
    problems = []
    count = 0
    for i in sorted(set(listed) | set(mig_mode)):
        g = gantry.get(i)
        if g is None:
            problems.append(f"GPU {i} is not in Gantry's node view")
            continue
        mode = mig_mode.get(i)
        mig = listed.get(i, {}).get("mig", [])
        if mode is None:
            mode = bool(mig) if mig else None
        if mode is not None and bool(g.get("mig_enabled")) != mode:
            problems.append(
                f"GPU {i} mig_enabled: Gantry {g.get('mig_enabled')}, driver {'on' if mode else 'off'}"
            )
        want = {m["uuid"]: m["profile"] for m in mig}
        have = {m.get("uuid"): m.get("profile") for m in g.get("mig_devices") or []}
        for u in sorted(set(want) - set(have)):
            problems.append(f"GPU {i}: MIG device {u} ({want[u]}) missing from Gantry")
        for u in sorted(set(have) - set(want)):
            problems.append(f"GPU {i}: Gantry lists MIG device {u}, nvidia-smi -L does not")
        for u in sorted(set(want) & set(have)):
            if want[u] != have[u]:
                problems.append(f"GPU {i}: MIG {u} profile Gantry {have[u]}, nvidia-smi {want[u]}")
        for m in g.get("mig_devices") or []:
            if m.get("parent_index") != i:
                problems.append(f"MIG {m.get('uuid')} under GPU {i} says parent {m.get('parent_index')}")
        count += len(want)
    on = sorted(i for i, v in mig_mode.items() if v) or sorted(i for i, g in listed.items() if g["mig"])
    return verdict(
        "mig-devices",
        problems,
        f"MIG on GPU(s) {on}: {count} MIG device(s), same UUIDs and profiles as nvidia-smi -L",
    )


def compare_device_nodes(
    smi: List[dict], minors: Dict[str, int], stats: Dict[int, Optional[Tuple[int, int]]]
) -> Check:
    """`device-nodes`: Gantry fences `/dev/nvidia{index}` (execution.gpu_device_pattern),
    so for every GPU that node must be the GPU's own device: major 195 and minor = the
    `Minor Number` nvidia-smi -q gives for its bus id. `stats`: {index: (major, minor)},
    None when the node is missing or not a character device."""
    problems = []
    for g in smi:
        i = g["index"]
        want = minors.get(normalize_bus_id(g["bus_id"]))
        st = stats.get(i)
        if st is None:
            problems.append(f"/dev/nvidia{i} is missing or not a character device (GPU {i} cannot be fenced)")
            continue
        major, minor = st
        if major != NVIDIA_MAJOR:
            problems.append(f"/dev/nvidia{i} has major {major}, not {NVIDIA_MAJOR}")
        if want is None:
            problems.append(f"GPU {i} ({g['bus_id']}): no Minor Number in nvidia-smi -q")
        elif minor != want:
            problems.append(
                f"GPU {i} ({g['bus_id']}) has minor {want} but /dev/nvidia{i} is minor {minor}: "
                f"fencing by index would deny the wrong device"
            )
    return verdict(
        "device-nodes",
        problems,
        f"/dev/nvidia0..{len(smi) - 1} are c {NVIDIA_MAJOR}:<index> and each is its GPU's minor number",
    )


def cuda_view(result: dict) -> Tuple[str, dict]:
    """What CUDA saw in a probe job: ('nvcc', parsed binary output) when a compiled probe
    ran, else ('ctypes', the libcuda reading)."""
    binary = result.get("binary")
    if binary is not None:
        parsed = parse_cuda_binary_output(binary.get("stdout", ""))
        if binary.get("rc") not in (0, None) and not parsed["error"]:
            parsed["error"] = f"exit {binary.get('rc')}: {binary.get('stderr', '').strip()[-300:]}"
        return "nvcc", parsed
    return "ctypes", result.get("ctypes") or {"error": "no CUDA reading"}


def expected_uuids(index: int, smi: List[dict], listed: Dict[int, dict]) -> List[str]:
    """The UUIDs a CUDA program given GPU `index` may report: the GPU's, or one of its
    MIG devices' when MIG is on."""
    out = [g["uuid"] for g in smi if g["index"] == index]
    out += [m["uuid"] for m in listed.get(index, {}).get("mig", [])]
    return out


# A MIG slice's device index in Gantry: 1000 + 10 x its GPU's index + its slot
# (host/api/src/mig.rs); its slot is the `Device N` of `nvidia-smi -L`.
SLICE_INDEX_BASE = 1000


def mig_slice(given: int, listed: Dict[int, dict]) -> Optional[dict]:
    """The MIG device of slice index `given` as `nvidia-smi -L` lists it, or None for a
    whole GPU (or a slice it does not list)."""
    if given < SLICE_INDEX_BASE:
        return None
    parent, slot = divmod(given - SLICE_INDEX_BASE, 10)
    return next((m for m in listed.get(parent, {}).get("mig", []) if m["device"] == slot), None)


def evaluate_cuda(result: Optional[dict], given: int, smi: List[dict], listed: Dict[int, dict]) -> Check:
    """`cuda-job`: the job given GPU `given` sees exactly one CUDA device, that GPU (by
    UUID), with CUDA_VISIBLE_DEVICES = its index (a MIG slice: that slice, by its MIG UUID),
    and real work on it succeeded."""
    name = "cuda-job"
    if result is None:
        return failed(name, "the job printed no result (see its log above)")
    env = result.get("env", {})
    problems = []
    mig = mig_slice(given, listed)
    want_visible = mig["uuid"] if mig else str(given)
    if env.get("CUDA_VISIBLE_DEVICES") != want_visible:
        problems.append(f"CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r}, expected {want_visible!r}")
    how, seen = cuda_view(result)
    if seen.get("error"):
        problems.append(f"CUDA ({how}) failed: {seen['error']}")
    else:
        count = seen.get("count")
        devices = seen.get("devices") or []
        if count != 1:
            problems.append(f"CUDA ({how}) sees {count} devices, expected exactly 1")
        allowed = {uuid_hex(u) for u in ([mig["uuid"]] if mig else expected_uuids(given, smi, listed))}
        for d in devices:
            if uuid_hex(d.get("uuid", "")) not in allowed:
                problems.append(
                    f"CUDA device {d.get('uuid')} ({d.get('name')}) is not GPU {given} "
                    f"({', '.join(sorted(expected_uuids(given, smi, listed)))})"
                )
        if seen.get("work") != "ok":
            problems.append(f"work on the device: {seen.get('work')}")
    smi_in_job = result.get("smi_list") or {}
    listed_in_job = re.findall(r"^GPU \d+: .*?\(UUID: ([^)]+)\)", smi_in_job.get("stdout", ""), re.M)
    note = f"; nvidia-smi -L in the job lists {len(listed_in_job)} GPU(s)" if smi_in_job else ""
    devices = seen.get("devices") or []
    first = devices[0] if devices else {}
    work = "kernel ran" if how == "nvcc" else "context + 4 KiB memset/copy"
    return verdict(
        name,
        problems,
        f"CUDA ({how}) sees 1 device, {first.get('uuid')} ({first.get('name')}) = GPU {given}'s UUID; "
        f"{work} ok; CUDA_VISIBLE_DEVICES={given}{note}",
    )


def evaluate_job_user(result: Optional[dict], user: str, uid: Optional[int]) -> Check:
    """`job-user`: the task ran as the job's user (run_as_user), not as root."""
    if result is None:
        return failed("job-user", "the job printed no result")
    got = result.get("uid")
    if uid is not None and got != uid:
        return failed("job-user", f"the task ran as uid {got}, expected {user} ({uid})")
    return passed("job-user", f"the task ran as {user} (uid {got})")


def evaluate_fence(name: str, result: Optional[dict], given: Sequence[int], indices: Sequence[int]) -> Check:
    """A fencing job opened `/dev/nvidia<i>` for every GPU: its own must open, every other
    must fail with EPERM (the cgroup's device rule; EACCES would be file permissions)."""
    if result is None:
        return failed(name, "the job printed no result")
    opens = result.get("opens", {})
    problems, denied, opened = [], [], []
    for i in indices:
        got = opens.get(str(i))
        path = f"/dev/nvidia{i}"
        if i in given:
            if got == "ok":
                opened.append(path)
            else:
                problems.append(f"{path} (given) did not open: {errno_text(got)}")
        elif got == "ok":
            problems.append(f"{path} (not given) opened: not fenced")
        elif got == EPERM:
            denied.append(path)
        else:
            problems.append(f"{path} (not given): {errno_text(got)}, expected EPERM")
    gave = f"given GPU {','.join(map(str, given))}" if given else "given no GPU"
    parts = []
    if opened:
        parts.append(f"{', '.join(opened)} opened")
    if denied:
        parts.append(f"{', '.join(denied)}: EPERM")
    return verdict(name, problems, f"{gave}: " + "; ".join(parts))


def errno_text(value) -> str:
    if value is None:
        return "not tried"
    if isinstance(value, int):
        return f"{errno.errorcode.get(value, '?')} ({value})"
    return str(value)


def evaluate_fraction(
    jobs: List[dict],
    results: List[Optional[dict]],
    gpu_during: Optional[dict],
    gantry_memory_mib: Optional[int],
    smi_memory_mib: Optional[int],
    milli: int = 500,
) -> List[Check]:
    """`fractional-share` and `fractional-memory-limit` for two jobs of `milli` each:
    both placed on one GPU, both on it in the node view at once, their running times
    overlap; each gets CUDA_VISIBLE_DEVICES, GANTRY_GPU_SHARE and
    GANTRY_GPU_MEMORY_LIMIT_MIB = memory_mib * milli / 1000 (floored, task_env.rs
    `fraction_env`) and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = `0=<limit>M`."""
    share, limit = "fractional-share", "fractional-memory-limit"
    placed = []
    for j in jobs:
        gpus = [s for t in j.get("tasks", []) for s in t.get("gpus", [])]
        placed.append(gpus)
    problems = []
    indices = set()
    for j, gpus in zip(jobs, placed):
        if len(gpus) != 1 or gpus[0].get("milli") != milli:
            problems.append(f"job {j.get('id')} holds {gpus}, expected one share of {milli}")
        else:
            indices.add(gpus[0]["index"])
    index = next(iter(indices)) if len(indices) == 1 else None
    if len(indices) > 1:
        problems.append(
            f"the jobs were placed on different GPUs {sorted(indices)} (first-fit packs fractions)"
        )
    ids = sorted(j.get("id") for j in jobs)
    if gpu_during is None:
        problems.append("no node view was taken while both ran")
    else:
        held = sorted(tuple(x) for x in gpu_during.get("jobs", []))
        want = sorted((i, milli) for i in ids)
        if index is not None and gpu_during.get("index") != index:
            problems.append(f"node view is of GPU {gpu_during.get('index')}, not {index}")
        if not set(want) <= set(held):
            problems.append(f"GPU {gpu_during.get('index')} held {held} while both ran, expected {want}")
    if any(r is None for r in results):
        problems.append("a job printed no result")
    else:
        starts = [r["start"] for r in results]
        ends = [r["release_seen"] for r in results]
        if not max(starts) < min(ends):
            problems.append("the two jobs did not run at the same time")
        for j, r in zip(jobs, results):
            if not r.get("released"):
                problems.append(f"job {j.get('id')} was never released (timed out)")
    overlap = ""
    if all(results) and results:
        together = min(r["release_seen"] for r in results) - max(r["start"] for r in results)
        overlap = f", together for {together:.1f} s"
    checks = [verdict(share, problems, f"jobs {ids} ran on GPU {index} at once, {milli} milli each{overlap}")]

    problems = []
    want_limit = None
    if gantry_memory_mib:
        want_limit = gantry_memory_mib * milli // 1000
        if smi_memory_mib is not None and abs(want_limit - smi_memory_mib * milli // 1000) > 1:
            problems.append(
                f"{milli}/1000 of Gantry's {gantry_memory_mib} MiB is not that of "
                f"nvidia-smi's {smi_memory_mib} MiB"
            )
    else:
        problems.append("Gantry does not know the GPU's memory (memory_mib 0): no limit is given")
    for j, r in zip(jobs, results):
        if r is None:
            continue
        env = r.get("env", {})
        expect = {
            "GANTRY_GPU_MEMORY_LIMIT_MIB": str(want_limit),
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={want_limit}M",
            "GANTRY_GPU_SHARE": f"{index}:{milli}",
            "CUDA_VISIBLE_DEVICES": str(index),
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(milli // 10, 1)),
        }
        for k, v in expect.items():
            if want_limit is None and "LIMIT" in k:
                continue
            if env.get(k) != v:
                problems.append(f"job {j.get('id')} {k}={env.get(k)!r}, expected {v!r}")
    checks.append(
        verdict(
            limit,
            problems,
            f"each job got GANTRY_GPU_MEMORY_LIMIT_MIB={want_limit} "
            f"({milli}/1000 of {gantry_memory_mib} MiB, floored) "
            f"and GANTRY_GPU_SHARE={index}:{milli}",
        )
    )
    return checks


def evaluate_fraction_cuda(
    results: List[Optional[dict]], apps: Optional[List[dict]], gpu_uuid: Optional[str]
) -> Check:
    """`fractional-cuda`: both jobs held a CUDA context on the shared GPU at once, as
    `nvidia-smi --query-compute-apps` showed while they waited."""
    name = "fractional-cuda"
    if any(r is None for r in results):
        return failed(name, "a job printed no result")
    holding = [r for r in results if (r.get("cuda") or {}).get("ok")]
    if len(holding) < len(results):
        errs = [
            str((r.get("cuda") or {}).get("error")) for r in results if not (r.get("cuda") or {}).get("ok")
        ]
        return skipped(name, f"CUDA did not start in the jobs ({'; '.join(errs)})")
    if apps is None:
        return skipped(name, "nvidia-smi --query-compute-apps could not be read")
    if not apps:
        return skipped(name, "nvidia-smi lists no compute processes (another PID namespace?)")
    pids = {r["pid"] for r in results}
    on_gpu = {a["pid"]: a for a in apps if a["pid"] in pids}
    problems = []
    for p in sorted(pids):
        a = on_gpu.get(p)
        if a is None:
            problems.append(f"job process {p} not among nvidia-smi's compute processes")
        elif gpu_uuid and a["gpu_uuid"] != gpu_uuid:
            problems.append(f"job process {p} is on {a['gpu_uuid']}, not the shared GPU {gpu_uuid}")
    mem = ", ".join(f"pid {p}: {on_gpu[p]['used_mib']} MiB" for p in sorted(on_gpu))
    return verdict(name, problems, f"both job processes held a CUDA context on {gpu_uuid} at once ({mem})")


def evaluate_accounting(reports: Dict[int, dict], expected: Dict[int, List[Tuple[int, int]]]) -> Check:
    """`accounting`: each job has one record with its GPU shares and
    gpu_milli_seconds = Σmilli × (end_ms − start_ms) / 1000 rounded (host/controller/src/accounting.rs
    `milli_seconds`), and the report's total says the same in GPU-seconds."""
    problems, parts = [], []
    for job_id in sorted(expected):
        report = reports.get(job_id)
        if report is None:
            problems.append(f"job {job_id}: no accounting answer")
            continue
        records = [r for r in report.get("records", []) if r.get("job_id") == job_id]
        if len(records) != 1:
            problems.append(f"job {job_id}: {len(records)} records, expected 1")
            continue
        r = records[0]
        shares = sorted((g["index"], g["milli"]) for g in r.get("gpus", []))
        if shares != sorted(expected[job_id]):
            problems.append(f"job {job_id}: record holds {shares}, expected {sorted(expected[job_id])}")
        milli = sum(m for _, m in shares)
        ms = int(r.get("end_ms", 0)) - int(r.get("start_ms", 0))
        want = (milli * ms + 500) // 1000
        got = int(r.get("gpu_milli_seconds", -1))
        if abs(got - want) > 1 or got <= 0:
            problems.append(
                f"job {job_id}: gpu_milli_seconds {got}, expected {want} ({milli} milli × {ms} ms)"
            )
        total = (report.get("total") or {}).get("gpu_seconds")
        if total is None or abs(float(total) - got / 1000.0) > 0.002:
            problems.append(f"job {job_id}: total gpu_seconds {total}, record says {got / 1000.0}")
        parts.append(f"job {job_id}: {milli} milli × {ms / 1000:.2f} s = {got / 1000:.2f} GPU-s")
    return verdict("accounting", problems, "; ".join(parts))


def evaluate_health(node: dict, signals: Optional[Dict[int, dict]]) -> Check:
    """`health-gpus`: Gantry's health of each GPU agrees with the signals health.rs judges,
    read here through nvidia-smi (uncorrected volatile ECC, retired pages pending): a GPU
    with a fatal signal must be unhealthy with that reason, a clean one healthy. Gantry's
    API shows only the verdict and its reason, not the counts."""
    problems, healthy = [], 0
    for g in node.get("gpus", []):
        i = g["index"]
        reason = (g.get("health") or {}).get("reason") or ""
        s = (signals or {}).get(i, {"ecc": None, "pending": None})
        fatal = []
        if s.get("ecc"):
            fatal.append("uncorrected volatile ECC")
        if s.get("pending"):
            fatal.append("retired")
        if g.get("healthy"):
            healthy += 1
            if fatal:
                problems.append(f"GPU {i} is healthy in Gantry but nvidia-smi shows {s}")
        elif not fatal:
            problems.append(
                f"GPU {i} is unhealthy in Gantry ({reason}) while nvidia-smi shows no fatal signal {s}"
            )
        else:
            for f in fatal:
                if f not in reason:
                    problems.append(f"GPU {i} reason {reason!r} does not name {f}")
    n = len(node.get("gpus", []))

    def told(key: str, fmt: Callable) -> str:
        vals = [(signals or {}).get(g["index"], {}).get(key) for g in node.get("gpus", [])]
        known = [v for v in vals if v is not None]
        if not known:
            return "N/A"
        return f"{fmt(known)} on {len(known)}/{n}"

    detail = (
        f"{healthy}/{n} GPU(s) healthy in GET /v1/nodes; nvidia-smi: uncorrected volatile ECC "
        f"{told('ecc', lambda v: 'total ' + str(sum(v)))}, retired pages pending "
        f"{told('pending', lambda v: 'yes' if any(v) else 'no')}"
    )
    return verdict("health-gpus", problems, detail)


HEALTH_ERRORS = (
    "cannot start the GPU health watcher",
    "GPU health polling is off",
    "cannot open the GPU",
    "waiting for Xid events failed",
    "every GPU is unhealthy",
    "is unhealthy",
    "GPU unhealthy at start",
    "Xid event from an unknown GPU",
    "NVML cannot",
    "NVML unavailable",
)


def evaluate_health_log(log_text: str, gpus: int) -> Check:
    """`health-poller`: the daemon log says the NVML health watcher started for the GPUs
    (and whether Xid events are delivered) and has no health-poll error (the messages of
    inventory/nvml.rs and host/controller/src/nodes.rs `record_gpu_fault`)."""
    lines = [strip_ansi(l) for l in log_text.splitlines()]
    started = [l for l in lines if "GPU health polling started" in l]
    problems = []
    if not started:
        said = [l.split(": ", 1)[-1].strip() for l in lines if "GPU health" in l]
        problems.append(
            "no 'GPU health polling started' line in the daemon log"
            + (f" (it says: {said[0]})" if said else "")
        )
    xid = None
    for l in started:
        m = re.search(r"xid_events=(\w+)", l)
        if m:
            xid = m.group(1)
        m = re.search(r"gpus=(\d+)", l)
        if m and int(m.group(1)) != gpus:
            problems.append(f"the watcher polls {m.group(1)} GPU(s), the node has {gpus}")
    errors = [
        l.strip() for l in lines if any(e in l for e in HEALTH_ERRORS) and re.search(r"\b(WARN|ERROR)\b", l)
    ]
    problems += [f"log: {e[:200]}" for e in errors[:5]]
    app_xids = sum(1 for l in lines if "Xid from a user's program" in l)
    no_events = any("no Xid events (" in l for l in lines)
    events = {"true": "delivered", "false": "not delivered (health is polled only)"}.get(xid or "", "unknown")
    detail = f"health watcher started for {gpus} GPU(s), Xid events {events}"
    if no_events:
        detail += " (driver: no Xid events)"
    detail += f"; no health-poll errors in the log; {app_xids} application Xid(s) logged"
    return verdict("health-poller", problems, detail)


# ---------------------------------------------------------------------------------------
# Probe: runs inside a job (as the job's user), prints one RESULT line
# ---------------------------------------------------------------------------------------

ENV_SHOWN = (
    "CUDA_VISIBLE_DEVICES",
    "GANTRY_GPU_MILLI",
    "GANTRY_GPU_SHARE",
    "GANTRY_GPU_MEMORY_LIMIT_MIB",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "CUDA_DEVICE_ORDER",
    "GANTRY_JOB_ID",
    "USER",
)


def format_uuid(raw: bytes, prefix: str = "GPU-") -> str:
    h = raw.hex()
    return f"{prefix}{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class Cuda:
    """The few CUDA driver API calls the probe makes, through ctypes (no toolkit needed)."""

    def __init__(self) -> None:
        c = ctypes
        self.lib = lib = c.CDLL("libcuda.so.1")
        lib.cuInit.argtypes = [c.c_uint]
        lib.cuDeviceGetCount.argtypes = [c.POINTER(c.c_int)]
        lib.cuDeviceGet.argtypes = [c.POINTER(c.c_int), c.c_int]
        # _v2 (CUDA 11.4+) gives a MIG device's own UUID; both forms are accepted.
        self.get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or lib.cuDeviceGetUuid
        self.get_uuid.argtypes = [c.c_void_p, c.c_int]
        lib.cuDeviceGetName.argtypes = [c.c_char_p, c.c_int, c.c_int]
        lib.cuDevicePrimaryCtxRetain.argtypes = [c.POINTER(c.c_void_p), c.c_int]
        lib.cuCtxSetCurrent.argtypes = [c.c_void_p]
        lib.cuMemAlloc_v2.argtypes = [c.POINTER(c.c_uint64), c.c_size_t]
        lib.cuMemsetD32_v2.argtypes = [c.c_uint64, c.c_uint, c.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [c.c_void_p, c.c_uint64, c.c_size_t]
        lib.cuMemFree_v2.argtypes = [c.c_uint64]
        lib.cuGetErrorName.argtypes = [c.c_int, c.POINTER(c.c_char_p)]
        self.release = getattr(lib, "cuDevicePrimaryCtxRelease_v2", None) or lib.cuDevicePrimaryCtxRelease
        self.release.argtypes = [c.c_int]
        self.dev = None
        self.ptr = None

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{what}: {(name.value or b'?').decode()} ({rc})")

    def devices(self) -> List[dict]:
        c = ctypes
        self.check(self.lib.cuInit(0), "cuInit")
        n = c.c_int()
        self.check(self.lib.cuDeviceGetCount(c.byref(n)), "cuDeviceGetCount")
        out = []
        for i in range(n.value):
            dev = c.c_int()
            self.check(self.lib.cuDeviceGet(c.byref(dev), i), "cuDeviceGet")
            raw = (c.c_ubyte * 16)()
            self.check(self.get_uuid(raw, dev), "cuDeviceGetUuid")
            name = c.create_string_buffer(256)
            self.check(self.lib.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
            out.append({"uuid": format_uuid(bytes(raw)), "name": name.value.decode()})
        return out

    def hold(self, nbytes: int) -> None:
        """Makes device 0's primary context current and allocates `nbytes` on it."""
        c = ctypes
        dev = c.c_int()
        self.check(self.lib.cuDeviceGet(c.byref(dev), 0), "cuDeviceGet")
        ctx = c.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(c.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.dev = dev
        self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        ptr = c.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(c.byref(ptr), nbytes), "cuMemAlloc")
        self.ptr = ptr

    def memset_and_read(self, words: int = 1024, value: int = 0x5A5A5A5A) -> str:
        c = ctypes
        self.check(self.lib.cuMemsetD32_v2(self.ptr.value, value, words), "cuMemsetD32")
        host = (c.c_uint32 * words)()
        self.check(self.lib.cuMemcpyDtoH_v2(host, self.ptr.value, words * 4), "cuMemcpyDtoH")
        bad = sum(1 for v in host if v != value)
        return "ok" if bad == 0 else f"{bad} of {words} words read back wrong"

    def drop(self) -> None:
        if self.ptr is not None:
            self.lib.cuMemFree_v2(self.ptr.value)
            self.ptr = None
        if self.dev is not None:
            self.release(self.dev)
            self.dev = None


def _run(argv: List[str], timeout: float = 120) -> dict:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"rc": None, "stdout": "", "stderr": str(e)}


def _base(mode: str) -> dict:
    return {
        "mode": mode,
        "pid": os.getpid(),
        "uid": os.getuid(),
        "env": {k: os.environ.get(k) for k in ENV_SHOWN if k in os.environ},
        "start": time.time(),
    }


def probe_cuda(binary: Optional[str]) -> dict:
    """CUDA as the job sees it: the nvcc-built probe when given, libcuda through ctypes
    (device count, UUIDs, names, a memset and copy back), and nvidia-smi -L."""
    out = _base("cuda")
    if binary:
        out["binary"] = _run([binary])
    reading: dict = {}
    cuda = None
    try:
        cuda = Cuda()
        reading["devices"] = cuda.devices()
        reading["count"] = len(reading["devices"])
        if reading["count"]:
            cuda.hold(4096)
            reading["work"] = cuda.memset_and_read()
    except (OSError, RuntimeError, AttributeError) as e:
        reading["error"] = str(e)
    finally:
        if cuda is not None:
            cuda.drop()
    out["ctypes"] = reading
    out["smi_list"] = _run(["nvidia-smi", "-L"], timeout=60)
    return out


def probe_fence(indices: List[int], pattern: str = "/dev/nvidia{index}") -> dict:
    """Opens the device node of every GPU in `indices`: "ok" or the errno."""
    out = _base("fence")
    opens = {}
    for i in indices:
        path = pattern.replace("{index}", str(i))
        try:
            fd = os.open(path, os.O_RDWR)
            os.close(fd)
            opens[str(i)] = "ok"
        except OSError as e:
            opens[str(i)] = e.errno
    out["opens"] = opens
    return out


def probe_hold(release: str, timeout: float, cuda: bool) -> dict:
    """A fractional job: optionally holds a CUDA context with 64 MiB, says it is ready,
    and waits until `release` exists (at most `timeout` s)."""
    out = _base("hold")
    holder = None
    if cuda:
        try:
            holder = Cuda()
            holder.devices()
            holder.hold(64 << 20)
            out["cuda"] = {"ok": True}
        except (OSError, RuntimeError, AttributeError) as e:
            out["cuda"] = {"ok": False, "error": str(e)}
            holder = None
    print(READY_MARK + json.dumps({"pid": out["pid"], "cuda": out.get("cuda")}), flush=True)
    deadline = out["start"] + timeout
    while not os.path.exists(release) and time.time() < deadline:
        time.sleep(0.1)
    out["released"] = os.path.exists(release)
    out["release_seen"] = time.time()
    if holder is not None:
        holder.drop()
    return out


def probe_main(args: argparse.Namespace) -> int:
    if args.mode == "cuda":
        out = probe_cuda(args.binary)
    elif args.mode == "fence":
        out = probe_fence([int(i) for i in args.indices.split(",") if i != ""])
    else:
        out = probe_hold(args.release, args.timeout, args.cuda)
    print(json.dumps(out, indent=1)[:4000])
    print(RESULT_MARK + json.dumps(out), flush=True)
    return 0


# ---------------------------------------------------------------------------------------
# The live run: a throw-away daemon, its API over the Unix socket, the probe jobs
# ---------------------------------------------------------------------------------------

CUDA_SOURCE = r"""
// gantry gpu-check: what CUDA sees inside a job (device count, UUIDs, names) and
// whether a kernel runs on device 0.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void twice(int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2 * i;
}

int main() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) { printf("error=cudaGetDeviceCount: %s\n", cudaGetErrorString(e)); return 1; }
  printf("count=%d\n", n);
  for (int d = 0; d < n; d++) {
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, d);
    if (e != cudaSuccess) { printf("error=cudaGetDeviceProperties: %s\n", cudaGetErrorString(e)); return 1; }
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    printf("device=%d uuid=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x name=%s\n",
           d, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15],
           p.name);
  }
  if (n > 0) {
    const int N = 1 << 20;
    int *x = 0, h[4] = {0, 0, 0, 0};
    cudaSetDevice(0);
    e = cudaMalloc(&x, N * sizeof(int));
    if (e == cudaSuccess) { twice<<<(N + 255) / 256, 256>>>(x, N); e = cudaDeviceSynchronize(); }
    if (e == cudaSuccess) e = cudaMemcpy(h, x + N - 4, sizeof h, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) printf("kernel=%s\n", cudaGetErrorString(e));
    else printf("kernel=%s\n", h[3] == 2 * (N - 1) ? "ok" : "wrong result");
    cudaFree(x);
  }
  return 0;
}
"""

TERMINAL = ("succeeded", "failed", "cancelled", "timed_out", "preempted")


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the daemon's Unix socket (no Host check there: the kernel names the caller)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


class Api:
    """The daemon's JSON API over `unix:<data_dir>/gantry.sock`; as root we are an admin
    there and may submit jobs for any user."""

    def __init__(self, socket_path: str, timeout: float = 15) -> None:
        self.socket_path, self.timeout = socket_path, timeout

    def request(self, method: str, path: str, body: Optional[dict] = None) -> Tuple[int, bytes]:
        conn = UnixHTTPConnection(self.socket_path, self.timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if method != "GET" else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body: Optional[dict] = None, ok: Tuple[int, ...] = (200, 201)):
        status, data = self.request(method, path, body)
        if status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {data[:500].decode(errors='replace')}")
        return json.loads(data)

    def text(self, path: str) -> str:
        status, data = self.request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}: {data[:300].decode(errors='replace')}")
        return data.decode(errors="replace")


class Abort(Exception):
    """Stops the run: nothing after this check can be done."""


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP: clean up and stop."""


def run_cmd(argv: List[str], timeout: float = 60) -> Tuple[int, str, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{' '.join(argv)}: timed out after {timeout:.0f} s"


def others_may_run(path: str) -> bool:
    try:
        real = os.path.realpath(path)
        return bool(os.stat(real).st_mode & stat.S_IXOTH)
    except OSError:
        return False


class Run:
    """One run of every check against a daemon started here."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.gantry = os.path.abspath(args.gantry)
        self.timeout = float(args.timeout)
        self.user = args.user
        self.results: List[Check] = []
        self.smi: Callable[[List[str]], Tuple[int, str, str]] = lambda a: run_cmd(["nvidia-smi"] + a, 120)
        self.daemon_args: List[str] = []  # extra `gantry serve` flags (plumbing tests without a GPU)
        self.proc: Optional[subprocess.Popen] = None
        self.jobs: List[int] = []
        self.gpu_jobs: Dict[int, List[Tuple[int, int]]] = {}
        self.saved: Dict[str, str] = {}
        self.work = ""
        self.started_at = 0.0

    # -- reporting --------------------------------------------------------------------

    def report(self, check: Check) -> None:
        self.results.append(check)
        print(check.line(), flush=True)

    def info(self, text: str) -> None:
        self.saved.setdefault("info", "")
        self.saved["info"] += f"# {text}\n"
        print(f"# {text}", flush=True)

    def guarded(self, name: str, fn: Callable[[], None]) -> None:
        """Runs one group of checks; an unexpected error is a FAIL of `name`, not the end."""
        try:
            fn()
        except (Abort, Interrupted, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the report must name any failure
            self.report(failed(name, f"{type(e).__name__}: {e}"))

    # -- driver ---------------------------------------------------------------------

    def smi_text(self, argv: List[str], required: bool = False) -> Optional[str]:
        rc, out, err = self.smi(argv)
        self.saved[f"nvidia-smi {' '.join(argv)}"] = out + (f"\n[stderr]\n{err}" if err.strip() else "")
        if rc != 0:
            if required:
                raise Abort(f"nvidia-smi {' '.join(argv)} failed (exit {rc}): {(err or out).strip()[:300]}")
            return None
        return out

    def read_driver(self) -> None:
        try:
            query = self.smi_text(
                ["--query-gpu=index,uuid,name,memory.total,pci.bus_id", "--format=csv,noheader,nounits"], True
            )
        except Abort as e:
            self.report(failed("prerequisites", str(e)))
            raise
        self.smi_gpus = parse_query_gpu(query or "")
        if not self.smi_gpus:
            self.report(failed("prerequisites", "nvidia-smi lists no GPU"))
            raise Abort("no GPU")
        banner = self.smi_text([]) or ""
        versions = parse_versions(banner)
        # sudo's PATH often lacks the toolkit: look where it is usually installed too.
        found = shutil.which("nvcc") or next(
            (p for p in ("/usr/local/cuda/bin/nvcc",) if os.access(p, os.X_OK)), None
        )
        rc, nvcc_out, _ = run_cmd([found, "--version"], 30) if found else (127, "", "")
        nvcc = re.search(r"release ([0-9.]+)", nvcc_out) if rc == 0 else None
        self.nvcc = found if nvcc else None
        self.info(
            f"{len(self.smi_gpus)} × {', '.join(sorted({g['name'] for g in self.smi_gpus}))}; "
            f"driver {versions.get('driver', '?')}, CUDA (driver) {versions.get('cuda', '?')}, "
            f"nvcc {nvcc.group(1) if nvcc else 'absent'}; kernel {os.uname().release}"
        )
        self.topo = self.smi_text(["topo", "-m"])
        self.listed = parse_gpu_list(self.smi_text(["-L"]) or "")
        self.mig_mode = parse_mig_mode(
            self.smi_text(["--query-gpu=index,mig.mode.current", "--format=csv,noheader,nounits"]) or ""
        )
        health = self.smi_text(
            [
                "--query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending",
                "--format=csv,noheader,nounits",
            ],
        )
        self.health_signals = parse_health(health) if health is not None else None
        self.minors = parse_minor_numbers(self.smi_text(["-q"]) or "")
        try:
            self.uid = pwd.getpwnam(self.user).pw_uid
        except KeyError:
            self.report(failed("prerequisites", f"no account {self.user!r} to run the jobs as"))
            raise Abort("no user")
        self.report(
            passed(
                "prerequisites",
                f"root, nvidia-smi lists {len(self.smi_gpus)} GPU(s), jobs run as {self.user}",
            )
        )

    # -- daemon ---------------------------------------------------------------------

    def start_daemon(self) -> None:
        work = self.work
        self.data_dir = os.path.join(work, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        os.chmod(self.data_dir, 0o711)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.cgroup_parent = f"gantry-gpu-check-{os.getpid()}"
        config = os.path.join(work, "gantry.toml")
        with open(config, "w") as f:
            f.write(
                "# written by scripts/gpu-check\n"
                f'listen = "127.0.0.1:{port}"\n'
                f'data_dir = "{self.data_dir}"\n'
                "[node]\n"
                f"health_poll_s = {int(self.args.health_poll_s)}\n"
                "[execution]\n"
                "# its own parent: a daemon sweeps the task cgroups under its parent at start\n"
                f'cgroup_parent = "{self.cgroup_parent}"\n'
            )
        self.log_path = os.path.join(work, "daemon.log")
        log = open(self.log_path, "wb")
        env = dict(os.environ, NO_COLOR="1")
        env.pop("RUST_LOG", None)
        self.proc = subprocess.Popen(
            [self.gantry, "serve", "--config", config] + self.daemon_args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches this script, which stops jobs first
            env=env,
        )
        log.close()
        with open(os.path.join(work, "daemon.pid"), "w") as f:
            f.write(f"{self.proc.pid}\n")
        self.started_at = time.time()
        self.api = Api(os.path.join(self.data_dir, "gantry.sock"))
        deadline = time.time() + self.timeout
        last = ""
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.report(
                    failed(
                        "daemon-start",
                        f"gantry serve exited with {self.proc.returncode}: {self.log_tail(15)}",
                    )
                )
                raise Abort("daemon exited")
            try:
                self.health = self.api.json("GET", "/v1/health")
                self.report(
                    passed(
                        "daemon-start",
                        f"gantry serve ready on 127.0.0.1:{port} and {self.api.socket_path} "
                        f"after {time.time() - self.started_at:.1f} s",
                    )
                )
                return
            except (OSError, RuntimeError, ValueError) as e:
                last = str(e)
            time.sleep(0.1)
        self.report(
            failed("daemon-start", f"not ready after {self.timeout:.0f} s ({last}): {self.log_tail(15)}")
        )
        raise Abort("daemon not ready")

    def log_text(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n: int) -> str:
        return " | ".join(strip_ansi(self.log_text()).strip().splitlines()[-n:])

    def nodes(self) -> dict:
        return local_node(self.api.json("GET", "/v1/nodes"))

    # -- jobs -----------------------------------------------------------------------

    def submit(self, name: str, argv: List[str], gpus: int = 0, gpu_milli: int = 0) -> dict:
        task = {"cpu_milli": 1000, "memory_mib": 4096}
        if gpus:
            task["gpus"] = gpus
        if gpu_milli:
            task["gpu_milli"] = gpu_milli
        spec = {
            "name": f"gpu-check-{name}",
            "argv": argv,
            "user": self.user,  # root on the socket may submit for any user
            "tasks": [task],
            "time_limit_s": int(self.timeout * 4),
            "requeue": False,
        }
        job = self.api.json("POST", "/v1/jobs", spec, ok=(201,))
        self.jobs.append(job["id"])
        return job

    def job(self, job_id: int) -> dict:
        return self.api.json("GET", f"/v1/jobs/{job_id}")

    def wait_job(self, job_id: int, states: Sequence[str], timeout: Optional[float] = None) -> dict:
        deadline = time.time() + (timeout or self.timeout)
        while True:
            job = self.job(job_id)
            if job["state"] in states:
                return job
            if job["state"] in TERMINAL or time.time() > deadline:
                why = (job.get("reason") or {}).get("message", "")
                raise RuntimeError(
                    f"job {job_id} is {job['state']} ({why or job.get('end_reason')}), "
                    f"wanted {'/'.join(states)}; log: "
                    + " | ".join(self.job_log(job_id).strip().splitlines()[-5:])
                )
            time.sleep(0.2)

    def job_log(self, job_id: int) -> str:
        try:
            return self.api.text(f"/v1/jobs/{job_id}/logs?task=0")
        except (OSError, RuntimeError) as e:
            return f"(no log: {e})"

    def run_probe(self, name: str, probe: List[str], gpus: int = 0) -> Tuple[dict, Optional[dict], str]:
        """Submits a probe job, waits for it to end; (job, its result, its log)."""
        job = self.submit(name, [self.python, self.probe_py, "probe"] + probe, gpus=gpus)
        end = self.wait_job(job["id"], TERMINAL)
        log = self.job_log(job["id"])
        if end["state"] != "succeeded":
            raise RuntimeError(
                f"job {job['id']} {end['state']} ({end.get('end_reason')}): "
                + " | ".join(log.strip().splitlines()[-8:])
            )
        if gpus:
            self.gpu_jobs[job["id"]] = [(s["index"], s["milli"]) for t in end["tasks"] for s in t["gpus"]]
        return end, job_result(log), log

    def prepare_probe(self) -> None:
        """Copies this file where the jobs' user can read it and builds the CUDA probe
        when nvcc exists (compiled here as root, run in the job)."""
        d = os.path.join(self.work, "probe")
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        self.probe_py = os.path.join(d, "gpu_check.py")
        shutil.copyfile(os.path.abspath(__file__), self.probe_py)
        os.chmod(self.probe_py, 0o644)
        self.python = next(
            (p for p in ("/usr/bin/python3", sys.executable) if p and others_may_run(p)), "python3"
        )
        self.cuda_binary = None
        if self.nvcc:
            src = os.path.join(d, "cuda_probe.cu")
            with open(src, "w") as f:
                f.write(CUDA_SOURCE)
            out = os.path.join(d, "cuda_probe")
            rc, so, se = run_cmd([self.nvcc, "-O2", "-o", out, src], 300)
            if rc == 0:
                os.chmod(out, 0o755)
                self.cuda_binary = out
                self.info(f"CUDA probe compiled with {self.nvcc}")
            else:
                self.info(
                    f"nvcc failed (exit {rc}), the job uses libcuda through ctypes: "
                    f"{(se or so).strip()[-300:]}"
                )

    # -- checks ---------------------------------------------------------------------

    def check_isolation(self) -> None:
        iso = self.health.get("isolation", {})
        cg = iso.get("cgroups")
        problems = []
        if cg not in ("v1", "v2"):
            problems.append(f"cgroups {cg} ({iso.get('cgroups_unavailable', '')}): no device fencing")
        if not iso.get("run_as_user"):
            problems.append("run_as_user is off")
        self.report(
            verdict("isolation", problems, f"cgroups {cg}, tasks run as their job's user (GET /v1/health)")
        )

    def check_inventory(self) -> None:
        node = self.nodes()
        self.node_name = node["name"]
        for c in compare_inventory(self.smi_gpus, node):
            self.report(c)
        if self.topo is None:
            self.report(skipped("nvlink-groups", "nvidia-smi topo -m failed on this machine"))
            self.report(skipped("nvlink-peers", "nvidia-smi topo -m failed on this machine"))
        else:
            try:
                topology = compare_topology(parse_topo(self.topo), node)
            except ValueError as e:
                topology = [
                    failed(n, f"cannot read nvidia-smi topo -m: {e}")
                    for n in ("nvlink-groups", "nvlink-peers")
                ]
            for c in topology:
                self.report(c)
        self.report(compare_mig(self.listed, self.mig_mode, node))
        stats: Dict[int, Optional[Tuple[int, int]]] = {}
        for g in self.smi_gpus:
            try:
                st = os.stat(f"/dev/nvidia{g['index']}")
                stats[g["index"]] = (
                    (os.major(st.st_rdev), os.minor(st.st_rdev)) if stat.S_ISCHR(st.st_mode) else None
                )
            except OSError:
                stats[g["index"]] = None
        if not self.minors:
            self.report(skipped("device-nodes", "no Minor Number in nvidia-smi -q"))
        else:
            self.report(compare_device_nodes(self.smi_gpus, self.minors, stats))

    def check_cuda(self) -> None:
        probe = ["cuda"] + (["--binary", self.cuda_binary] if self.cuda_binary else [])
        job, result, _ = self.run_probe("cuda", probe, gpus=1)
        given = job["tasks"][0]["gpus"][0]["index"]
        if given != 0:
            self.info(
                f"the CUDA job was given GPU {given}, not 0 (placement's choice); checked against GPU {given}"
            )
        self.report(evaluate_cuda(result, given, self.smi_gpus, self.listed))
        self.report(evaluate_job_user(result, self.user, self.uid))

    def check_fence_other(self) -> None:
        indices = [g["index"] for g in self.smi_gpus]
        if len(indices) < 2:
            self.report(
                skipped("fence-other-gpu", "one GPU: no other GPU's device to open (fence-no-gpu covers it)")
            )
            return
        job, result, _ = self.run_probe("fence", ["fence", "--indices", ",".join(map(str, indices))], gpus=1)
        given = [s["index"] for s in job["tasks"][0]["gpus"]]
        self.report(evaluate_fence("fence-other-gpu", result, given, indices))

    def check_fence_none(self) -> None:
        indices = [g["index"] for g in self.smi_gpus]
        _, result, _ = self.run_probe(
            "fence-none", ["fence", "--indices", ",".join(map(str, indices))], gpus=0
        )
        self.report(evaluate_fence("fence-no-gpu", result, [], indices))

    def check_fractional(self) -> None:
        release = os.path.join(self.work, "release")
        argv = [
            self.python,
            self.probe_py,
            "probe",
            "hold",
            "--release",
            release,
            "--timeout",
            str(int(self.timeout * 2)),
            "--cuda",
        ]
        jobs = [self.submit(f"half-{k}", argv, gpu_milli=500) for k in (1, 2)]
        running = [self.wait_job(j["id"], ("running",)) for j in jobs]
        deadline = time.time() + self.timeout
        ready = {}
        while len(ready) < 2 and time.time() < deadline:
            for j in running:
                r = job_result(self.job_log(j["id"]), READY_MARK)
                if r:
                    ready[j["id"]] = r
            time.sleep(0.2)
        if len(ready) < 2:
            self.info(
                f"only {len(ready)} of the 2 half-GPU jobs said they were ready within {self.timeout:.0f} s"
            )
        node = self.nodes()
        index = running[0]["tasks"][0]["gpus"][0]["index"]
        gpu_during = next((g for g in node["gpus"] if g["index"] == index), None)
        rc, apps_out, _ = self.smi(
            ["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"]
        )
        apps = parse_compute_apps(apps_out) if rc == 0 else None
        with open(release, "w"):
            pass
        os.chmod(release, 0o644)
        ends = [self.wait_job(j["id"], TERMINAL) for j in jobs]
        results = [job_result(self.job_log(j["id"])) for j in jobs]
        for e in ends:
            if e["state"] == "succeeded":
                self.gpu_jobs[e["id"]] = [(s["index"], s["milli"]) for t in e["tasks"] for s in t["gpus"]]
        smi_mem = next((g["memory_mib"] for g in self.smi_gpus if g["index"] == index), None)
        for c in evaluate_fraction(
            running, results, gpu_during, gpu_during and gpu_during.get("memory_mib"), smi_mem
        ):
            self.report(c)
        uuid = next((g["uuid"] for g in self.smi_gpus if g["index"] == index), None)
        self.report(evaluate_fraction_cuda(results, apps, uuid))

    def check_accounting(self) -> None:
        if not self.gpu_jobs:
            self.report(skipped("accounting", "no GPU job ended"))
            return
        reports: Dict[int, dict] = {}
        deadline = time.time() + self.timeout
        for job_id in self.gpu_jobs:
            while True:
                r = self.api.json("GET", f"/v1/accounting?job={job_id}")
                if r.get("records") or time.time() > deadline:
                    reports[job_id] = r
                    break
                time.sleep(0.2)
        self.report(evaluate_accounting(reports, self.gpu_jobs))

    def check_health(self) -> None:
        # The watcher must have polled a few times: wait out two poll intervals since start.
        poll = max(int(self.args.health_poll_s), 1)
        until = min(self.started_at + 2 * poll + 1, time.time() + self.timeout)
        while time.time() < until:
            time.sleep(0.2)
        self.report(evaluate_health(self.nodes(), self.health_signals))
        self.report(evaluate_health_log(self.log_text(), len(self.smi_gpus)))

    # -- cleanup --------------------------------------------------------------------

    def cleanup(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not leave tasks behind
        problems = []
        if self.proc is not None and self.proc.poll() is None:
            for job_id in self.jobs:
                try:
                    if self.job(job_id)["state"] not in TERMINAL:
                        self.api.request("POST", f"/v1/jobs/{job_id}/cancel")
                except (OSError, RuntimeError, ValueError) as e:
                    problems.append(f"cancel {job_id}: {e}")
            deadline = time.time() + 30
            for job_id in self.jobs:
                if not self.wait_ended(job_id, deadline):
                    problems.append(
                        f"job {job_id} did not end when cancelled; its process groups were killed"
                    )
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
                problems.append("the daemon ignored SIGTERM for 15 s and was killed")
        self.remove_cgroups()
        self.save_outputs()
        if not self.args.keep and self.work and os.path.isdir(self.work):
            shutil.rmtree(self.work, ignore_errors=True)
        elif self.work:
            self.info(f"kept {self.work}")
        for p in problems:
            self.info(f"cleanup: {p}")

    def wait_ended(self, job_id: int, deadline: float) -> bool:
        """Waits for a cancelled job to end; past `deadline` kills its tasks' process
        groups (the shim's pid is its group) and answers False."""
        job: dict = {}
        while True:
            try:
                job = self.job(job_id)
            except (OSError, RuntimeError, ValueError):
                return True  # the daemon cannot say; nothing more to do through it
            if job["state"] in TERMINAL:
                return True
            if time.time() > deadline:
                break
            time.sleep(0.2)
        for t in job.get("tasks", []):
            if t.get("pid"):
                try:
                    os.killpg(int(t["pid"]), signal.SIGKILL)
                except OSError:
                    pass
        return False

    def remove_cgroups(self) -> None:
        parent = getattr(self, "cgroup_parent", None)
        if not parent:
            return
        roots = [os.path.join("/sys/fs/cgroup", parent)]
        try:
            roots += [os.path.join("/sys/fs/cgroup", c, parent) for c in os.listdir("/sys/fs/cgroup")]
        except OSError:
            pass
        for root in roots:
            if not os.path.isdir(root):
                continue
            for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass

    def save_outputs(self) -> None:
        out = self.args.out
        if not out:
            return
        try:
            os.makedirs(out, exist_ok=True)
            if getattr(self, "log_path", None) and os.path.exists(self.log_path):
                shutil.copyfile(self.log_path, os.path.join(out, "daemon.log"))
            with open(os.path.join(out, "nvidia-smi.txt"), "w") as f:
                for k, v in self.saved.items():
                    if k != "info":
                        f.write(f"=== {k}\n{v}\n")
            with open(os.path.join(out, "report.txt"), "w") as f:
                f.write(self.saved.get("info", ""))
                f.write("".join(c.line() + "\n" for c in self.results))
        except OSError as e:
            print(f"# could not save outputs to {out}: {e}", flush=True)

    # -- all ------------------------------------------------------------------------

    def main(self) -> int:
        def interrupted(signum, _frame):
            raise Interrupted(signal.Signals(signum).name)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, interrupted)
        self.work = self.args.work or tempfile.mkdtemp(prefix="gantry-gpu-check.", dir="/tmp")
        os.makedirs(self.work, exist_ok=True)
        os.chmod(self.work, 0o755)  # the jobs' user walks through it to the probe and its work dir
        self.info(
            f"gantry gpu-check {time.strftime('%Y-%m-%d %H:%M:%S %z')} on {socket.gethostname()}; "
            f"binary {self.gantry}"
        )
        try:
            if os.geteuid() != 0:
                self.report(
                    failed("prerequisites", "run as root (cgroups, device fencing, jobs as another user)")
                )
                raise Abort("not root")
            self.read_driver()
            self.prepare_probe()
            self.start_daemon()
            self.guarded("isolation", self.check_isolation)
            self.guarded("inventory", self.check_inventory)
            self.guarded("cuda-job", self.check_cuda)
            self.guarded("fence-other-gpu", self.check_fence_other)
            self.guarded("fence-no-gpu", self.check_fence_none)
            self.guarded("fractional-share", self.check_fractional)
            self.guarded("accounting", self.check_accounting)
            self.guarded("health", self.check_health)
        except Abort:
            pass
        except (Interrupted, KeyboardInterrupt) as e:
            self.report(failed("interrupted", f"{e or 'SIGINT'}: stopped early; jobs and daemon stopped"))
        except Exception as e:  # noqa: BLE001 - a bug here must still end in a report and a cleanup
            self.report(failed("gpu-check", f"internal error, stopped early: {type(e).__name__}: {e}"))
        finally:
            self.cleanup()
        counts = {s: sum(1 for c in self.results if c.status == s) for s in ("PASS", "FAIL", "SKIP")}
        summary = f"SUMMARY: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
        print(summary, flush=True)
        if self.args.out:
            try:
                with open(os.path.join(self.args.out, "report.txt"), "a") as f:
                    f.write(summary + "\n")
                print(f"# report, daemon log and nvidia-smi output in {self.args.out}", flush=True)
            except OSError:
                pass
        return 1 if counts["FAIL"] else 0


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every check (root, NVIDIA driver)")
    r.add_argument("--gantry", required=True, help="the gantry binary")
    r.add_argument("--work", help="an empty directory for the daemon's data (default: a new one in /tmp)")
    r.add_argument("--timeout", type=float, default=90, help="bound of every wait, seconds (default 90)")
    r.add_argument(
        "--health-poll-s", type=int, default=2, help="node.health_poll_s of the daemon (default 2)"
    )
    r.add_argument("--user", default="nobody", help="the user the jobs are submitted for (default nobody)")
    r.add_argument("--out", help="where to copy the report, daemon log and nvidia-smi output")
    r.add_argument("--keep", action="store_true", help="keep the work directory")
    pr = sub.add_parser("probe", help="(inside a job) what the job sees")
    pr.add_argument("mode", choices=("cuda", "fence", "hold"))
    pr.add_argument("--binary", help="cuda: the nvcc-built probe")
    pr.add_argument("--indices", default="", help="fence: GPU indices whose /dev/nvidia<i> to open")
    pr.add_argument("--release", help="hold: wait until this file exists")
    pr.add_argument("--timeout", type=float, default=180, help="hold: at most this long")
    pr.add_argument("--cuda", action="store_true", help="hold: keep a CUDA context with 64 MiB meanwhile")
    args = p.parse_args(argv)
    if args.cmd == "probe":
        return probe_main(args)
    return Run(args).main()


if __name__ == "__main__":
    sys.exit(main())
