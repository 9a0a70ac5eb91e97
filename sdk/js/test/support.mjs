// Builds the arguments of a stage call the way the host does (flat lists, interned strings).

/** A cycle + job-list as the host sends them, from nested job descriptions. */
export function call(nowMs, specs) {
  const strings = [];
  const sym = (s) => {
    let i = strings.indexOf(s);
    if (i < 0) i = strings.push(s) - 1;
    return i;
  };
  const list = { jobs: [], groups: [], labels: [] };
  specs.forEach((s, n) => {
    const job = {
      id: n + 1, name: sym(s.name ?? ""), user: sym("alice"), account: sym("alice"), queue: sym("default"),
      tier: s.tier ?? 0, submitMs: s.submitMs ?? nowMs - 1000 * (specs.length - n), timeLimitS: 0, kind: "batch",
      preemptible: false, firstGroup: list.groups.length, groupCount: 0, firstLabel: list.labels.length, labelCount: 0,
    };
    for (const grp of s.groups ?? [{ count: 1, gpus: 1 }]) {
      list.groups.push({ count: 1, gpus: 0, gpuMilli: 0, cpuMilli: 1000, memoryMib: 1024, gpuModelMask: 0, ...grp });
      job.groupCount++;
    }
    for (const [k, v] of Object.entries(s.labels ?? {})) {
      list.labels.push({ key: sym(k), value: sym(v) });
      job.labelCount++;
    }
    list.jobs.push(job);
  });
  const ctx = {
    id: 7, nowMs, seed: 7, strings, gpuModels: [], userUsage: [], accountUsage: [], userGpus: [], accountGpus: [], queues: [],
    totals: { nodes: 1, gpuMilliTotal: 4000, gpuMilliFree: 0, cpuMilliTotal: 2000, memoryMibTotal: 24000 },
  };
  return { ctx, list, previous: list.jobs.map(() => 0) };
}
