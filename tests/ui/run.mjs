// End-to-end test of the dashboard in headless Chromium against a live daemon (started
// by tests/tests/ui.rs, which checks the API side afterwards).
//
//   node tests/ui/run.mjs URL ADMIN_TOKEN USER_TOKEN RUNNING_JOB PENDING_JOB SHOT_DIR \
//     SERVICE SERVICE_REPLICA_JOBS SCALED_SERVICE
//
// RUNNING_JOB holds 2 GPUs and prints "hello-from-the-dashboard-test"; PENDING_JOB
// cannot start (it shows a reason). SERVICE is a replicated service with 2 replicas (jobs
// SERVICE_REPLICA_JOBS, comma-separated) whose name holds markup; SCALED_SERVICE is an
// autoscaled one with readings. Checks: the cluster view shows the GPUs the running
// job holds; the queue shows the pending job's reason; a job submitted while the page
// is open appears without a reload (live update); the job page streams the log; the
// services view lists the service with its replicas (its name as text, not markup), a
// third replica after a scale while the page is open, and the autoscaler's chart; an
// admin rolls back the pipeline from the page; a `user` token sees no admin controls
// and the API refuses it the rollback. Writes one screenshot per view (1280×800) to
// SHOT_DIR and prints a JSON summary on its last line. Exits non-zero on any failure.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [url, adminToken, userToken, runningJob, pendingJob, shotDir, service, serviceJobs, scaledService] = process.argv.slice(2);
if (!scaledService) {
  console.error("usage: node run.mjs URL ADMIN_TOKEN USER_TOKEN RUNNING_JOB PENDING_JOB SHOT_DIR SERVICE SERVICE_REPLICA_JOBS SCALED_SERVICE");
  process.exit(2);
}
mkdirSync(shotDir, { recursive: true });
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const TIMEOUT = 20000;
const summary = {};

function check(cond, message) {
  if (!cond) throw new Error(`check failed: ${message}`);
}

async function signIn(browser, token) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); summary.pageErrors = (summary.pageErrors || 0) + 1; });
  await page.goto(`${url}/ui/`);
  await page.locator("#token").fill(token);
  await page.locator("#login button[type=submit]").click();
  return page;
}

async function visit(page, hash) {
  const before = Number((await page.locator("#view").getAttribute("data-loads")) || 0);
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction((n) => Number(document.getElementById("view").dataset.loads || 0) > n, before);
}

const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
try {
  // --- admin ---
  const page = await signIn(browser, adminToken);
  await page.getByTestId("whoami").filter({ hasText: "(admin)" }).waitFor();
  await page.locator("#view[data-loads]").waitFor();

  // Cluster: the running job's GPUs.
  const held = page.locator(`.gpu[data-jobs~="${runningJob}"]`);
  await held.first().waitFor();
  summary.gpusHeldByRunningJob = await held.count();
  check(summary.gpusHeldByRunningJob === 2, `job ${runningJob} should hold 2 GPU tiles, found ${summary.gpusHeldByRunningJob}`);
  check((await held.first().getAttribute("data-state")) === "used", "a GPU held whole is drawn as used");
  const tileText = await held.first().innerText();
  check(tileText.includes(`#${runningJob}`) && tileText.includes("alice"), `the tile names the job and its user: ${tileText}`);
  await page.screenshot({ path: join(shotDir, "cluster.png") });

  // Queue: the pending job's reason.
  await visit(page, "#/queue");
  const reason = page.getByTestId(`reason-${pendingJob}`);
  await reason.waitFor();
  summary.pendingReason = await reason.innerText();
  check(/insufficient-gpus/.test(summary.pendingReason), `pending reason: ${summary.pendingReason}`);
  await page.getByTestId(`running-${runningJob}`).waitFor();

  // Live update: a job submitted now appears without a reload.
  const t0 = Date.now();
  const submitted = await page.evaluate(async ([token]) => {
    const r = await fetch("/v1/jobs", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "live-update", argv: ["/bin/sh", "-c", "sleep 600"], tasks: [{ count: 1, gpus: 4 }] }) });
    return (await r.json()).id;
  }, [adminToken]);
  await page.getByTestId(`pending-${submitted}`).waitFor();
  summary.liveUpdateMs = Date.now() - t0;
  // The pending job's expected start (forecast when it was submitted, shown since this
  // reload): a bar and "in ..." or "now" (it waits for the running job), never "not
  // forecast yet" or "never".
  const start = page.getByTestId(`start-${pendingJob}`);
  await start.waitFor();
  summary.pendingStart = await start.innerText();
  check(/^\s*(now|in \d)/.test(summary.pendingStart), `pending job's expected start: ${summary.pendingStart}`);
  check((await start.locator(".bar").count()) === 1, "the expected start is drawn as a bar");
  await page.screenshot({ path: join(shotDir, "queue.png") });

  // Job page: its log, streamed.
  await visit(page, `#/job/${runningJob}`);
  await page.getByTestId("log").filter({ hasText: "hello-from-the-dashboard-test" }).waitFor();
  summary.trace = await page.getByTestId("trace").innerText();
  await page.screenshot({ path: join(shotDir, "job.png") });

  // Services: the service and its two replicas; its name is text, not markup.
  await visit(page, "#/services");
  const card = page.getByTestId(`service-${service}`);
  await card.waitFor();
  summary.serviceName = await page.getByTestId(`service-name-${service}`).innerText();
  check(summary.serviceName.includes("<img"), `the service's name shown as text: ${summary.serviceName}`);
  check((await card.locator("img").count()) === 0, "no element made from the service's name");
  check(await page.evaluate(() => window.xss === undefined), "the service's name ran no script");
  const replicas = page.getByTestId(`replicas-${service}`);
  summary.serviceJobs = serviceJobs.split(",").map(Number);
  for (const job of summary.serviceJobs) await replicas.getByTestId(`job-link-${job}`).waitFor();
  summary.serviceReplicas = await page.getByTestId(`service-replicas-${service}`).innerText();
  check(/\/2 replicas/.test(summary.serviceReplicas), `wanted replicas: ${summary.serviceReplicas}`);
  check((await replicas.locator("tbody tr").count()) === 2, "two replica rows");
  // Scaled while the page is open: the third replica appears without a reload.
  const scaled = await page.evaluate(async ([token, id]) => {
    const r = await fetch(`/v1/services/${id}/scale`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ replicas: 3 }) });
    return r.status;
  }, [adminToken, service]);
  check(scaled === 200, `scaling the service answered ${scaled}`);
  await page.getByTestId(`service-replicas-${service}`).filter({ hasText: "/3 replicas" }).waitFor();
  await page.waitForFunction((id) => document.querySelectorAll(`[data-testid="replicas-${id}"] tbody tr`).length === 3, service);
  // The autoscaled service: its readings as a chart.
  const chart = page.getByTestId(`scale-chart-${scaledService}`);
  await chart.locator("svg").waitFor();
  check((await chart.locator("svg polyline").count()) === 2, "the chart draws the metric and the replicas");
  summary.scaleSamples = Number(await chart.getAttribute("data-samples"));
  check(summary.scaleSamples > 0, "the chart has the autoscaler's readings");
  await page.screenshot({ path: join(shotDir, "services.png"), fullPage: true });

  // Policy: roll back from the page.
  await visit(page, "#/policy");
  const versionText = await page.getByTestId("active-version").innerText();
  summary.versionBefore = Number(/Version (\d+)/.exec(versionText)[1]);
  page.once("dialog", (d) => d.accept());
  await page.getByTestId("rollback").click();
  await page.getByTestId("policy-message").filter({ hasText: "Rolled back" }).waitFor();
  await page.getByTestId("active-version").filter({ hasText: "(rollback" }).waitFor();
  summary.versionAfter = Number(/Version (\d+)/.exec(await page.getByTestId("active-version").innerText())[1]);
  check(summary.versionAfter === summary.versionBefore + 1, `rollback made version ${summary.versionAfter}`);
  await page.getByTestId("history").filter({ hasText: "ada" }).waitFor();
  await page.screenshot({ path: join(shotDir, "policy.png"), fullPage: true });

  // Usage.
  await visit(page, "#/usage");
  await page.getByTestId("fairshare").locator("svg").first().waitFor();
  await page.getByTestId("usage-accounts").locator("svg").first().waitFor();
  await page.getByTestId("usage-users").locator("svg").first().waitFor();
  await page.screenshot({ path: join(shotDir, "usage.png"), fullPage: true });

  // A small window still works (the queue, 640×480).
  await page.setViewportSize({ width: 640, height: 480 });
  await visit(page, "#/queue");
  await page.getByTestId(`reason-${pendingJob}`).waitFor();
  await page.screenshot({ path: join(shotDir, "queue-small.png") });
  summary.submittedLive = submitted;

  // --- user ---
  const userPage = await signIn(browser, userToken);
  await userPage.getByTestId("whoami").filter({ hasText: "(user)" }).waitFor();
  await visit(userPage, "#/policy");
  await userPage.getByTestId("active-version").waitFor();
  summary.userRollbackButtons = await userPage.getByTestId("rollback").count();
  check(summary.userRollbackButtons === 0, "a user token sees no rollback button");
  summary.userRollbackStatus = await userPage.evaluate(async (token) => {
    const r = await fetch("/v1/policy/rollback", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: "{}" });
    return r.status;
  }, userToken);
  check(summary.userRollbackStatus === 403, `the API refuses a user's rollback: ${summary.userRollbackStatus}`);
  await userPage.screenshot({ path: join(shotDir, "policy-as-user.png") });
  check(!summary.pageErrors, "no JavaScript errors on the page");
} catch (e) {
  console.error(e.stack || String(e));
  console.log(JSON.stringify({ ok: false, ...summary }));
  await browser.close();
  process.exit(1);
}
await browser.close();
console.log(JSON.stringify({ ok: true, ...summary }));
