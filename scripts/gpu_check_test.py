#!/usr/bin/env python3
"""Self-test of `scripts/gpu-check` (`scripts/gpu-check --self-test`): the parsers and
comparisons of `gpu_check.py` against the samples in `scripts/gpu-check-fixtures/`
(nvidia-smi output of an 8×H100 SXM box, a 1×H200 VM, a 2-GPU PCIe workstation without
NVLink and an A100 with MIG on; `GET /v1/nodes` answers that match and one that does
not; probe job logs and a daemon log). No GPU, daemon or network needed.

Owns: these tests. Does not own the checks themselves (`gpu_check.py`).
"""

import copy
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True

import gpu_check as gc  # noqa: E402

FIXTURES = os.path.join(HERE, "gpu-check-fixtures")


def fixture(*path: str) -> str:
    with open(os.path.join(FIXTURES, *path)) as f:
        return f.read()


def nodes(*path: str) -> dict:
    return gc.local_node(json.loads(fixture(*path)))


def by_name(checks):
    return {c.name: c for c in checks}


class Box:
    """One machine's recorded outputs, parsed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.smi = gc.parse_query_gpu(fixture(name, "query-gpu.csv"))
        self.topo = gc.parse_topo(fixture(name, "topo-m.txt"))
        self.listed = gc.parse_gpu_list(fixture(name, "list.txt"))
        path = os.path.join(FIXTURES, name, "mig-mode.csv")
        self.mig = gc.parse_mig_mode(fixture(name, "mig-mode.csv")) if os.path.exists(path) else {}
        self.health = gc.parse_health(fixture(name, "health.csv"))
        self.node = nodes(name, "nodes.json")


class ParseQueryGpu(unittest.TestCase):
    def test_h100_box(self):
        b = Box("h100-8x")
        self.assertEqual([g["index"] for g in b.smi], list(range(8)))
        self.assertEqual({g["name"] for g in b.smi}, {"NVIDIA H100 80GB HBM3"})
        self.assertEqual({g["memory_mib"] for g in b.smi}, {81559})
        self.assertEqual(b.smi[0]["uuid"], "GPU-e539a78b-c8ef-f346-0b12-ae6ead581e57")
        self.assertEqual(gc.normalize_bus_id(b.smi[0]["bus_id"]), "0000:1b:00.0")
        self.assertEqual(gc.normalize_bus_id(b.smi[7]["bus_id"]), "0000:df:00.0")

    def test_single_h200(self):
        b = Box("h200-1x")
        self.assertEqual(len(b.smi), 1)
        self.assertEqual(b.smi[0]["name"], "NVIDIA H200")
        self.assertEqual(b.smi[0]["memory_mib"], 143771)
        self.assertEqual(gc.normalize_bus_id(b.smi[0]["bus_id"]), "0000:00:05.0")

    def test_not_available_memory_and_short_lines(self):
        g = gc.parse_query_gpu("0, GPU-x, NVIDIA A100-SXM4-40GB, [N/A], 00000000:00:04.0\n\n")
        self.assertIsNone(g[0]["memory_mib"])
        with self.assertRaises(ValueError):
            gc.parse_query_gpu("0, GPU-x, only three\n")


class ParseTopology(unittest.TestCase):
    def test_hgx_h100_is_one_nvlink_group(self):
        b = Box("h100-8x")  # header with ANSI underline codes, NIC rows and columns
        self.assertEqual(sorted(b.topo), list(range(8)))
        self.assertEqual(b.topo[0][0], "X")
        self.assertEqual(b.topo[2][5], "NV18")
        self.assertEqual(gc.topo_groups(b.topo), [list(range(8))])
        self.assertEqual(gc.topo_peers(b.topo)[3], [0, 1, 2, 4, 5, 6, 7])

    def test_pcie_pair_without_nvlink(self):
        b = Box("pcie-2x")
        self.assertEqual(b.topo, {0: {0: "X", 1: "PHB"}, 1: {0: "PHB", 1: "X"}})
        self.assertEqual(gc.topo_groups(b.topo), [[0], [1]])
        self.assertEqual(gc.topo_peers(b.topo), {0: [], 1: []})

    def test_single_gpu(self):
        b = Box("h200-1x")
        self.assertEqual(b.topo, {0: {0: "X"}})
        self.assertEqual(gc.topo_groups(b.topo), [[0]])

    def test_islands_and_sys_links(self):
        # Two NVLinked pairs (0-1, 2-3) joined only through the CPUs.
        text = (
            "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV4\tSYS\tSYS\t0-7\t0\n"
            "GPU1\tNV4\t X \tSYS\tSYS\t0-7\t0\n"
            "GPU2\tSYS\tSYS\t X \tNV4\t8-15\t1\n"
            "GPU3\tSYS\tSYS\tNV4\t X \t8-15\t1\n"
        )
        topo = gc.parse_topo(text)
        self.assertEqual(gc.topo_groups(topo), [[0, 1], [2, 3]])
        self.assertEqual(gc.parse_groups_label("0,1|2,3"), gc.topo_groups(topo))

    def test_garbage_is_refused(self):
        with self.assertRaises(ValueError):
            gc.parse_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")


class ParseOther(unittest.TestCase):
    def test_bus_ids_like_inventory_groups_rs(self):
        self.assertEqual(gc.normalize_bus_id("00000000:07:00.0"), "0000:07:00.0")
        self.assertEqual(gc.normalize_bus_id(" 0000:0A:00.0 "), "0000:0a:00.0")
        self.assertEqual(gc.normalize_bus_id("not-a-bus"), "not-a-bus")

    def test_groups_label_forms(self):
        self.assertEqual(gc.parse_groups_label("0-7"), [list(range(8))])
        self.assertEqual(gc.parse_groups_label("0-3|4-7"), [[0, 1, 2, 3], [4, 5, 6, 7]])
        self.assertEqual(gc.parse_groups_label("0,2|1,3|4"), [[0, 2], [1, 3], [4]])
        self.assertEqual(gc.parse_groups_label("0-2,5,7,8|3,4,6"), [[0, 1, 2, 5, 7, 8], [3, 4, 6]])

    def test_mig_listing(self):
        b = Box("a100-mig")
        mig = b.listed[0]["mig"]
        self.assertEqual([m["profile"] for m in mig], ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
        self.assertEqual([m["device"] for m in mig], [0, 1, 2, 3])
        self.assertTrue(all(m["uuid"].startswith("MIG-") for m in mig))
        self.assertEqual(b.mig, {0: True})
        self.assertEqual(Box("h100-8x").mig, {i: False for i in range(8)})
        self.assertTrue(all(not g["mig"] for g in Box("h100-8x").listed.values()))

    def test_pre_r470_mig_uuids(self):
        text = (
            "GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
            "  MIG 1g.5gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0)\n"
        )
        self.assertEqual(
            gc.parse_gpu_list(text)[0]["mig"],
            [{"profile": "1g.5gb", "device": 0, "uuid": "MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0"}],
        )

    def test_health_signals(self):
        self.assertEqual(Box("h100-8x").health[3], {"ecc": 0, "pending": None})
        self.assertEqual(Box("pcie-2x").health[1], {"ecc": 0, "pending": False})
        self.assertEqual(
            gc.parse_health("0, 2, Yes\n1, [N/A], [N/A]\n"),
            {0: {"ecc": 2, "pending": True}, 1: {"ecc": None, "pending": None}},
        )

    def test_minor_numbers_from_q(self):
        minors = gc.parse_minor_numbers(fixture("pcie-2x", "q.txt"))
        self.assertEqual(minors, {"0000:01:00.0": 0, "0000:02:00.0": 1})

    def test_versions_from_the_banner(self):
        self.assertEqual(
            gc.parse_versions(fixture("h100-8x", "nvidia-smi.txt")), {"driver": "550.90.07", "cuda": "12.4"}
        )
        self.assertEqual(
            gc.parse_versions(fixture("pcie-2x", "q.txt")), {"driver": "550.127.05", "cuda": "12.4"}
        )

    def test_compute_apps(self):
        uuid = "GPU-e539a78b-c8ef-f346-0b12-ae6ead581e57"
        text = f"48377, {uuid}, 520\n48378, {uuid}, 518\n"
        apps = gc.parse_compute_apps(text)
        self.assertEqual([a["pid"] for a in apps], [48377, 48378])
        self.assertEqual(apps[1]["used_mib"], 518)
        self.assertEqual(gc.parse_compute_apps("No running processes found\n"), [])

    def test_uuid_formatting_matches_nvml(self):
        raw = bytes.fromhex("e539a78bc8eff3460b12ae6ead581e57")
        self.assertEqual(gc.format_uuid(raw), "GPU-e539a78b-c8ef-f346-0b12-ae6ead581e57")
        self.assertEqual(gc.uuid_hex("GPU-E539A78B-c8ef-f346-0b12-ae6ead581e57"), raw.hex())
        self.assertEqual(
            gc.uuid_hex("MIG-70b796dd-6564-6802-da50-dff4c17323a5"), "70b796dd65646802da50dff4c17323a5"
        )

    def test_job_logs(self):
        r = gc.job_result(fixture("h100-8x", "job-cuda.log"))
        self.assertEqual(r["mode"], "cuda")
        self.assertEqual(gc.parse_cuda_binary_output(r["binary"]["stdout"])["count"], 1)
        self.assertIsNone(gc.job_result("no result here\nGPUCHECK-RESULT {broken\n"))
        ready = gc.job_result('GPUCHECK-READY {"pid": 7, "cuda": null}\n', gc.READY_MARK)
        self.assertEqual(ready["pid"], 7)


class CompareInventory(unittest.TestCase):
    def test_every_matching_box_passes(self):
        for name in ("h100-8x", "h200-1x", "pcie-2x", "a100-mig"):
            with self.subTest(box=name):
                b = Box(name)
                checks = by_name(gc.compare_inventory(b.smi, b.node) + gc.compare_topology(b.topo, b.node))
                for c in checks.values():
                    self.assertEqual(c.status, "PASS", c.line())

    def test_the_mismatching_view_fails_with_each_difference(self):
        b = Box("h100-8x")
        bad = nodes("h100-8x", "nodes-mismatch.json")
        checks = by_name(gc.compare_inventory(b.smi, bad) + gc.compare_topology(b.topo, bad))
        inv = checks["inventory-gpus"]
        self.assertEqual(inv.status, "FAIL")
        self.assertIn("GPU 3 UUID", inv.detail)
        self.assertIn("GPU 5 memory: Gantry 80000 MiB, nvidia-smi 81559 MiB", inv.detail)
        self.assertIn("GPU 6 bus id", inv.detail)
        self.assertNotIn("GPU 0 ", inv.detail)
        self.assertEqual(checks["nvlink-groups"].status, "FAIL")
        self.assertIn("[[0, 1, 2, 3], [4, 5, 6, 7]] (label 0-3|4-7)", checks["nvlink-groups"].detail)
        self.assertEqual(checks["nvlink-peers"].status, "FAIL")
        self.assertIn("GPU 7 peers", checks["nvlink-peers"].detail)
        self.assertTrue(inv.line().startswith("FAIL inventory-gpus: "))

    def test_memory_within_rounding_and_bus_spellings(self):
        b = Box("h200-1x")
        node = copy.deepcopy(b.node)
        node["gpus"][0]["memory_mib"] = 143770
        node["gpus"][0]["pci_bus_id"] = "0000:00:05.0"
        self.assertEqual(by_name(gc.compare_inventory(b.smi, node))["inventory-gpus"].status, "PASS")
        node["gpus"][0]["memory_mib"] = 143768
        self.assertEqual(by_name(gc.compare_inventory(b.smi, node))["inventory-gpus"].status, "FAIL")

    def test_missing_gpus_and_config_source(self):
        b = Box("pcie-2x")
        node = copy.deepcopy(b.node)
        node["gpus"].pop()
        node["gpu_source"] = "config"
        checks = by_name(gc.compare_inventory(b.smi, node))
        self.assertEqual(checks["inventory-source"].status, "FAIL")
        self.assertIn("GPU 1 (GPU-", checks["inventory-gpus"].detail)
        self.assertIn("Gantry lists 1 GPUs, nvidia-smi 2", checks["inventory-gpus"].detail)

    def test_a_label_claiming_nvlink_on_pcie_fails(self):
        b = Box("pcie-2x")
        node = copy.deepcopy(b.node)
        node["labels"][gc.GROUPS_LABEL] = "0,1"
        self.assertEqual(by_name(gc.compare_topology(b.topo, node))["nvlink-groups"].status, "FAIL")

    def test_local_node_is_picked(self):
        views = json.loads(fixture("h100-8x", "nodes.json"))
        agent = dict(views[0], name="other", agent="http://10.0.0.5:8421")
        self.assertEqual(gc.local_node([agent] + views)["name"], "dgx-h100-07")
        with self.assertRaises(ValueError):
            gc.local_node([agent, dict(agent, name="third")])


class CompareMig(unittest.TestCase):
    def test_mig_off_is_skipped(self):
        b = Box("h100-8x")
        self.assertEqual(gc.compare_mig(b.listed, b.mig, b.node).status, "SKIP")
        self.assertEqual(gc.compare_mig(Box("h200-1x").listed, {}, Box("h200-1x").node).status, "SKIP")

    def test_mig_devices_match(self):
        b = Box("a100-mig")
        c = gc.compare_mig(b.listed, b.mig, b.node)
        self.assertEqual(c.status, "PASS", c.line())
        self.assertIn("4 MIG device(s)", c.detail)

    def test_mig_differences_fail(self):
        b = Box("a100-mig")
        node = copy.deepcopy(b.node)
        dropped = node["gpus"][0]["mig_devices"].pop()
        node["gpus"][0]["mig_devices"][0]["profile"] = "4g.20gb"
        c = gc.compare_mig(b.listed, b.mig, node)
        self.assertEqual(c.status, "FAIL")
        self.assertIn(f"MIG device {dropped['uuid']} (1g.5gb) missing from Gantry", c.detail)
        self.assertIn("profile Gantry 4g.20gb, nvidia-smi 3g.20gb", c.detail)
        node = copy.deepcopy(b.node)
        node["gpus"][0]["mig_enabled"] = False
        node["gpus"][0]["mig_devices"] = []
        self.assertIn("mig_enabled: Gantry False, driver on", gc.compare_mig(b.listed, b.mig, node).detail)


class CompareDeviceNodes(unittest.TestCase):
    def setUp(self):
        self.b = Box("pcie-2x")
        self.minors = gc.parse_minor_numbers(fixture("pcie-2x", "q.txt"))

    def test_nodes_are_their_gpus(self):
        c = gc.compare_device_nodes(self.b.smi, self.minors, {0: (195, 0), 1: (195, 1)})
        self.assertEqual(c.status, "PASS", c.line())

    def test_swapped_minors_and_missing_nodes_fail(self):
        swapped = {"0000:01:00.0": 1, "0000:02:00.0": 0}
        c = gc.compare_device_nodes(self.b.smi, swapped, {0: (195, 0), 1: (195, 1)})
        self.assertEqual(c.status, "FAIL")
        self.assertIn("fencing by index would deny the wrong device", c.detail)
        c = gc.compare_device_nodes(self.b.smi, self.minors, {0: (195, 0), 1: None})
        self.assertIn("/dev/nvidia1 is missing", c.detail)


class EvaluateJobs(unittest.TestCase):
    def setUp(self):
        self.b = Box("h100-8x")
        self.cuda = gc.job_result(fixture("h100-8x", "job-cuda.log"))

    def test_cuda_job_sees_its_gpu(self):
        c = gc.evaluate_cuda(self.cuda, 0, self.b.smi, self.b.listed)
        self.assertEqual(c.status, "PASS", c.line())
        self.assertIn("CUDA (nvcc) sees 1 device, GPU-e539a78b", c.detail)
        self.assertEqual(gc.evaluate_job_user(self.cuda, "nobody", 65534).status, "PASS")
        self.assertEqual(gc.evaluate_job_user(self.cuda, "nobody", 99).status, "FAIL")

    def test_cuda_through_ctypes_without_nvcc(self):
        r = copy.deepcopy(self.cuda)
        del r["binary"]
        c = gc.evaluate_cuda(r, 0, self.b.smi, self.b.listed)
        self.assertEqual(c.status, "PASS", c.line())
        self.assertIn("CUDA (ctypes)", c.detail)
        r["ctypes"] = {"error": "libcuda.so.1: cannot open shared object file"}
        self.assertIn("CUDA (ctypes) failed", gc.evaluate_cuda(r, 0, self.b.smi, self.b.listed).detail)

    def test_cuda_job_seeing_too_much_or_the_wrong_gpu_fails(self):
        r = copy.deepcopy(self.cuda)
        u1 = self.b.smi[1]["uuid"]
        r["binary"]["stdout"] = (
            f"count=2\ndevice=0 uuid={self.b.smi[0]['uuid']} name=NVIDIA H100 80GB HBM3\n"
            f"device=1 uuid={u1} name=NVIDIA H100 80GB HBM3\nkernel=ok\n"
        )
        c = gc.evaluate_cuda(r, 0, self.b.smi, self.b.listed)
        self.assertEqual(c.status, "FAIL")
        self.assertIn("sees 2 devices", c.detail)
        self.assertIn(f"CUDA device {u1}", c.detail)
        r = copy.deepcopy(self.cuda)
        r["env"]["CUDA_VISIBLE_DEVICES"] = "3"
        self.assertIn("CUDA_VISIBLE_DEVICES='3'", gc.evaluate_cuda(r, 0, self.b.smi, self.b.listed).detail)
        r = copy.deepcopy(self.cuda)
        r["binary"] = {
            "rc": 1,
            "stdout": "error=cudaGetDeviceCount: no CUDA-capable device is detected\n",
            "stderr": "",
        }
        self.assertIn("no CUDA-capable device", gc.evaluate_cuda(r, 0, self.b.smi, self.b.listed).detail)

    def test_cuda_on_a_mig_gpu_may_see_a_mig_device(self):
        a = Box("a100-mig")
        mig = a.listed[0]["mig"][0]["uuid"]
        r = copy.deepcopy(self.cuda)
        r["binary"][
            "stdout"
        ] = f"count=1\ndevice=0 uuid=GPU-{mig[4:]} name=NVIDIA A100-SXM4-40GB MIG 3g.20gb\nkernel=ok\n"
        self.assertEqual(gc.evaluate_cuda(r, 0, a.smi, a.listed).status, "PASS")

    def test_a_job_given_a_mig_slice_sees_that_slice_by_its_uuid(self):
        a = Box("a100-mig")
        second = a.listed[0]["mig"][1]
        given = 1000 + second["device"]
        r = copy.deepcopy(self.cuda)
        r["env"]["CUDA_VISIBLE_DEVICES"] = second["uuid"]
        r["binary"]["stdout"] = (
            f"count=1\ndevice=0 uuid=GPU-{second['uuid'][4:]} name=NVIDIA A100-SXM4-40GB MIG\nkernel=ok\n"
        )
        self.assertEqual(gc.evaluate_cuda(r, given, a.smi, a.listed).status, "PASS")
        first = a.listed[0]["mig"][0]["uuid"]
        r["binary"]["stdout"] = f"count=1\ndevice=0 uuid=GPU-{first[4:]} name=x\nkernel=ok\n"
        c = gc.evaluate_cuda(r, given, a.smi, a.listed)
        self.assertEqual(c.status, "FAIL", c.line())
        r["env"]["CUDA_VISIBLE_DEVICES"] = str(given)
        self.assertIn(f"expected {second['uuid']!r}", gc.evaluate_cuda(r, given, a.smi, a.listed).detail)

    def test_fencing(self):
        fence = gc.job_result(fixture("h100-8x", "job-fence.log"))
        c = gc.evaluate_fence("fence-other-gpu", fence, [0], list(range(8)))
        self.assertEqual(c.status, "PASS", c.line())
        self.assertIn("/dev/nvidia0 opened; /dev/nvidia1, ", c.detail)
        leaky = copy.deepcopy(fence)
        leaky["opens"]["5"] = "ok"
        leaky["opens"]["6"] = 13
        c = gc.evaluate_fence("fence-other-gpu", leaky, [0], list(range(8)))
        self.assertEqual(c.status, "FAIL")
        self.assertIn("/dev/nvidia5 (not given) opened: not fenced", c.detail)
        self.assertIn("/dev/nvidia6 (not given): EACCES (13), expected EPERM", c.detail)
        none = {"opens": {"0": 1}}
        self.assertEqual(gc.evaluate_fence("fence-no-gpu", none, [], [0]).status, "PASS")
        self.assertEqual(gc.evaluate_fence("fence-no-gpu", {"opens": {"0": "ok"}}, [], [0]).status, "FAIL")
        self.assertEqual(gc.evaluate_fence("fence-no-gpu", None, [], [0]).status, "FAIL")

    def test_probe_fence_reports_errnos(self):
        out = gc.probe_fence([0, 1], pattern="/dev/{index}")
        self.assertEqual(out["opens"]["0"], 2)  # ENOENT: no /dev/0
        ok = gc.probe_fence([0], pattern="/dev/null")
        self.assertEqual(ok["opens"]["0"], "ok")


class EvaluateFractionAndAccounting(unittest.TestCase):
    def setUp(self):
        self.jobs = [
            {"id": 4, "tasks": [{"gpus": [{"index": 0, "milli": 500}]}]},
            {"id": 5, "tasks": [{"gpus": [{"index": 0, "milli": 500}]}]},
        ]
        env = {
            "CUDA_VISIBLE_DEVICES": "0",
            "GANTRY_GPU_SHARE": "0:500",
            "GANTRY_GPU_MEMORY_LIMIT_MIB": "40779",  # 81559 * 500 / 1000, floored
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=40779M",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
        }
        self.results = [
            {
                "pid": 101,
                "env": dict(env),
                "start": 100.0,
                "release_seen": 104.0,
                "released": True,
                "cuda": {"ok": True},
            },
            {
                "pid": 102,
                "env": dict(env),
                "start": 100.4,
                "release_seen": 104.1,
                "released": True,
                "cuda": {"ok": True},
            },
        ]
        self.gpu = {"index": 0, "memory_mib": 81559, "allocated_milli": 1000, "jobs": [[4, 500], [5, 500]]}

    def test_two_halves_share_gpu_0(self):
        checks = by_name(gc.evaluate_fraction(self.jobs, self.results, self.gpu, 81559, 81559))
        self.assertEqual(checks["fractional-share"].status, "PASS", checks["fractional-share"].line())
        self.assertIn("together for 3.6 s", checks["fractional-share"].detail)
        self.assertEqual(
            checks["fractional-memory-limit"].status, "PASS", checks["fractional-memory-limit"].line()
        )
        self.assertIn("GANTRY_GPU_MEMORY_LIMIT_MIB=40779", checks["fractional-memory-limit"].detail)

    def test_odd_memory_rounds_down(self):
        for r in self.results:
            r["env"]["GANTRY_GPU_MEMORY_LIMIT_MIB"] = "71885"
            r["env"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=71885M"
        checks = by_name(gc.evaluate_fraction(self.jobs, self.results, self.gpu, 143771, 143771))
        self.assertEqual(
            checks["fractional-memory-limit"].status, "PASS", checks["fractional-memory-limit"].line()
        )

    def test_failures(self):
        jobs = copy.deepcopy(self.jobs)
        jobs[1]["tasks"][0]["gpus"][0]["index"] = 1
        results = copy.deepcopy(self.results)
        results[1]["start"] = 104.5
        results[0]["env"]["GANTRY_GPU_MEMORY_LIMIT_MIB"] = "40960"
        gpu = dict(self.gpu, jobs=[[4, 500]])
        checks = by_name(gc.evaluate_fraction(jobs, results, gpu, 81559, 81559))
        share = checks["fractional-share"]
        self.assertEqual(share.status, "FAIL")
        self.assertIn("different GPUs [0, 1]", share.detail)
        self.assertIn("did not run at the same time", share.detail)
        self.assertIn("held [(4, 500)]", share.detail)
        self.assertIn(
            "job 4 GANTRY_GPU_MEMORY_LIMIT_MIB='40960', expected '40779'",
            checks["fractional-memory-limit"].detail,
        )

    def test_fraction_cuda(self):
        uuid = "GPU-e539a78b-c8ef-f346-0b12-ae6ead581e57"
        apps = [
            {"pid": 101, "gpu_uuid": uuid, "used_mib": 520},
            {"pid": 102, "gpu_uuid": uuid, "used_mib": 518},
        ]
        self.assertEqual(gc.evaluate_fraction_cuda(self.results, apps, uuid).status, "PASS")
        self.assertEqual(gc.evaluate_fraction_cuda(self.results, apps[:1], uuid).status, "FAIL")
        self.assertEqual(gc.evaluate_fraction_cuda(self.results, [], uuid).status, "SKIP")
        no_cuda = copy.deepcopy(self.results)
        no_cuda[0]["cuda"] = {"ok": False, "error": "libcuda.so.1: not found"}
        self.assertEqual(gc.evaluate_fraction_cuda(no_cuda, apps, uuid).status, "SKIP")

    def record(self, job, shares, start, end, gms):
        return {
            "job_id": job,
            "task_index": 0,
            "run": 0,
            "job_name": "gpu-check",
            "user": "nobody",
            "account": "nobody",
            "queue": "default",
            "node": "n",
            "gpus": [{"index": i, "milli": m} for i, m in shares],
            "cpu_milli": 1000,
            "memory_mib": 4096,
            "start_ms": start,
            "end_ms": end,
            "gpu_milli_seconds": gms,
            "cpu_seconds": 0.4,
            "memory_peak_mib": 300,
            "exit": {"Exited": 0},
            "oom_killed": False,
        }

    def report(self, rec):
        gs = rec["gpu_milli_seconds"] / 1000.0
        total = {
            "name": "",
            "gpu_seconds": gs,
            "gpu_hours": gs / 3600,
            "cpu_seconds": 0.4,
            "cpu_hours": 0.0001,
            "records": 1,
            "jobs": 1,
        }
        return {"records": [rec], "truncated": False, "total": total, "users": [], "accounts": []}

    def test_accounting(self):
        reports = {
            1: self.report(self.record(1, [(0, 1000)], 1_000_000, 1_002_417, 2417)),
            4: self.report(self.record(4, [(0, 500)], 1_000_000, 1_004_001, 2001)),  # 2000.5 rounds up
        }
        expected = {1: [(0, 1000)], 4: [(0, 500)]}
        c = gc.evaluate_accounting(reports, expected)
        self.assertEqual(c.status, "PASS", c.line())
        self.assertIn("job 4: 500 milli × 4.00 s = 2.00 GPU-s", c.detail)
        reports[4]["records"][0]["gpus"][0]["milli"] = 1000
        reports[1] = {"records": [], "total": {"gpu_seconds": 0}}
        c = gc.evaluate_accounting(reports, expected)
        self.assertEqual(c.status, "FAIL")
        self.assertIn("job 1: 0 records, expected 1", c.detail)
        self.assertIn("job 4: record holds [(0, 1000)], expected [(0, 500)]", c.detail)


class EvaluateHealth(unittest.TestCase):
    def test_clean_gpus_are_healthy(self):
        b = Box("h100-8x")
        c = gc.evaluate_health(b.node, b.health)
        self.assertEqual(c.status, "PASS", c.line())
        self.assertIn("8/8 GPU(s) healthy", c.detail)
        self.assertIn("retired pages pending N/A", c.detail)

    def test_signals_and_verdicts_must_agree(self):
        b = Box("pcie-2x")
        signals = {0: {"ecc": 3, "pending": False}, 1: {"ecc": 0, "pending": False}}
        self.assertEqual(gc.evaluate_health(b.node, signals).status, "FAIL")
        node = copy.deepcopy(b.node)
        node["gpus"][0]["healthy"] = False
        node["gpus"][0]["health"] = {"reason": "3 uncorrected volatile ECC error(s)", "since_ms": 1}
        self.assertEqual(gc.evaluate_health(node, signals).status, "PASS")
        self.assertEqual(gc.evaluate_health(node, b.health).status, "FAIL")
        self.assertEqual(gc.evaluate_health(b.node, None).status, "PASS")

    def test_daemon_log(self):
        c = gc.evaluate_health_log(fixture("h100-8x", "daemon.log"), 8)
        self.assertEqual(c.status, "PASS", c.line())
        self.assertIn("Xid events delivered", c.detail)
        self.assertIn("1 application Xid(s)", c.detail)
        self.assertEqual(gc.evaluate_health_log(fixture("h100-8x", "daemon.log"), 4).status, "FAIL")
        bad = fixture("h100-8x", "daemon.log") + (
            "2026-12-01T10:15:06.000000Z  WARN gantry::inventory::nvml: "
            "cannot open the GPU: Unknown Error gpu=3\n"
            "2026-12-01T10:15:06.100000Z ERROR gantry::scheduler::nodes: GPU 3 of node dgx-h100-07 is "
            "unhealthy: the GPU is lost (fallen off the bus or not answering: GpuIsLost); "
            "it gets no new tasks node=dgx-h100-07 gpu=3\n"
        )
        c = gc.evaluate_health_log(bad, 8)
        self.assertEqual(c.status, "FAIL")
        self.assertIn("cannot open the GPU", c.detail)
        self.assertEqual(gc.evaluate_health_log("gantry listening on http://127.0.0.1:1\n", 8).status, "FAIL")


class Report(unittest.TestCase):
    def test_lines(self):
        self.assertEqual(gc.passed("a", "b").line(), "PASS a: b")
        self.assertEqual(gc.verdict("x", ["one", "two"], "fine").line(), "FAIL x: one; two")
        self.assertEqual(gc.skipped("m", "why").line(), "SKIP m: why")


if __name__ == "__main__":
    unittest.main(verbosity=2)
