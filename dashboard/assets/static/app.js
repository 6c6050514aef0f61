// skiff dashboard: the course's visuals from a real run.
//
// Plain JavaScript, no library, no build step. Every text from the
// cluster goes into the page through textContent (the h() helper), never
// as HTML. The page reads the dashboard's own endpoints only
// (api/chain, api/devices, api/hpa, api/watch: see dashboard.go) and is pushed
// changes on one Server-Sent Events stream; it never polls.
//
// A page written by `skiff trace pod NAME -o html` embeds its data in
// <script type="application/json" id="skiff-chain"> and shows the chain
// view alone, with no network at all.
"use strict";

// ---------- text, in English and Simplified Chinese ----------

const TEXT = {
  en: {
    "nav.cluster": "Cluster", "nav.chain": "Chain", "nav.sequence": "gRPC sequence", "nav.loops": "Control loops", "nav.hpa": "Autoscalers",
    "hpa.target": "target", "hpa.replicas": "Replicas", "hpa.current": "current", "hpa.desired": "desired", "hpa.decisions": "Decisions, newest first",
    "hpa.rescalesOnly": "rescales only", "hpa.none": "No decisions yet: the controller posts one after each sync.",
    "hpa.nometrics": "No metric gave a value yet (see the decisions).", "hpa.nohpas": "No HorizontalPodAutoscalers (kubectl autoscale deployment NAME --cpu-percent=50 --min=1 --max=10).",
    next: "Next ▶", prev: "◀ Prev", auto: "Auto", stop: "Stop", reset: "Reset",
    live: "live", offline: "reconnecting…", total: "This pod, end to end", course: "The course's typical time",
    pickPod: "Pick a pod", pickNode: "Pick a node", noTrace: "No trace recorded for this pod yet.",
    pending: "Pending: why, per node", nodes: "Nodes", pods: "Pods", queues: "Queues", claims: "Resource claims",
    workloads: "Workloads", jobs: "Jobs", fit: "fits", unfit: "does not fit", chosen: "chosen",
    plugin: "plugin", score: "score", total_: "total", allocate: "Allocate request / response",
    cdi: "CDI edits", env: "env", mounts: "mounts", deviceNodes: "device nodes", devices: "devices",
    controllers: "All controllers", deployments: "Deployments", replicasets: "ReplicaSets",
    observed: "observed", desired: "desired", action: "action", held: "held by", free: "free",
    topology: "Topology", noCalls: "No device plugin calls recorded on this node (no device manager, or no plugin yet).",
    step: "Step", of: "of", payload: "Payload",
    steps: ["kubectl apply", "API server", "Scheduler", "kubelet (agent)", "Device plugin", "Container toolkit (CDI)", "Container starts"],
    explain: [
      "The client sends the Pod to the API server over HTTPS. With Docker you say each step; with Kubernetes you say the end state, and the cluster works towards it.",
      "The API server authenticates the request (who are you), authorizes it (may you), runs admission (defaults, validation, Pod Security), writes the Pod to the store and answers. The Pod is Pending: no node yet. The resourceVersion is the store's revision of this write.",
      "The scheduler sees an unbound Pod. Filter drops the nodes that cannot run it (enough nvidia.com/gpu? node ready? selector, affinity, taints). Score ranks the rest (least/most allocated, GPUs on the same PCIe switch or NVLink score higher). Bind writes the chosen node into the Pod.",
      "The kubelet (skiff's agent) on the chosen node sees the Pod bound to it. It never touches the GPU itself: it only coordinates, calling the device plugin and the container runtime.",
      "The device manager asks the device plugin (gRPC over a unix socket) to Allocate the GPUs it picked among the free healthy ones. The plugin answers with what the container needs: CDI device names, env such as NVIDIA_VISIBLE_DEVICES, mounts. With DRA the driver's NodePrepareResources plays this part.",
      "The runtime resolves the CDI devices: the NVIDIA Container Toolkit's spec adds the device nodes (/dev/nvidia0, /dev/nvidiactl…), the driver libraries as mounts, and env, to the container's OCI spec.",
      "The container starts; nvidia-smi inside sees only the GPUs it was given. GPUs are limits-only and cannot be oversubscribed: a GPU belongs to one container.",
    ],
    seqLanes: ["kubectl", "API server", "kubelet", "device plugin", "GPU + toolkit"],
    seq: {
      Register: "Register: the plugin tells the kubelet its resource name and socket",
      GetDevicePluginOptions: "GetDevicePluginOptions: what the plugin supports",
      ListAndWatch: "ListAndWatch: the device list and health",
      GetPreferredAllocation: "GetPreferredAllocation: which devices the plugin prefers",
      Allocate: "Allocate(device IDs)",
      AllocateResponse: "AllocateResponse: env, mounts, CDI devices",
      PreStartContainer: "PreStartContainer",
      create: "create Pod", bound: "Pod bound to this node", inject: "inject devices, libraries, env (CDI)", running: "container running",
      health: "health changed",
    },
  },
  zh: {
    "nav.cluster": "集群", "nav.chain": "调度链路", "nav.sequence": "gRPC 时序", "nav.loops": "控制循环", "nav.hpa": "自动扩缩容",
    "hpa.target": "目标", "hpa.replicas": "副本数", "hpa.current": "当前", "hpa.desired": "期望", "hpa.decisions": "决策（最新在前）",
    "hpa.rescalesOnly": "只看扩缩容", "hpa.none": "还没有决策：控制器每次同步后记录一条。",
    "hpa.nometrics": "还没有指标给出数值（见下方决策）。", "hpa.nohpas": "没有 HorizontalPodAutoscaler（kubectl autoscale deployment NAME --cpu-percent=50 --min=1 --max=10）。",
    next: "下一步 ▶", prev: "◀ 上一步", auto: "自动", stop: "停止", reset: "重置",
    live: "实时", offline: "正在重连…", total: "本 Pod 端到端耗时", course: "课程中的典型耗时",
    pickPod: "选择一个 Pod", pickNode: "选择一个节点", noTrace: "这个 Pod 还没有记录到链路。",
    pending: "Pending：每个节点的原因", nodes: "节点", pods: "Pod", queues: "队列", claims: "资源申领 (ResourceClaim)",
    workloads: "工作负载 (Workload)", jobs: "Job", fit: "满足", unfit: "不满足", chosen: "选中",
    plugin: "插件", score: "得分", total_: "总分", allocate: "Allocate 请求 / 响应",
    cdi: "CDI 修改", env: "环境变量", mounts: "挂载", deviceNodes: "设备节点", devices: "设备",
    controllers: "所有控制器", deployments: "Deployment", replicasets: "ReplicaSet",
    observed: "观察到", desired: "期望", action: "动作", held: "占用者", free: "空闲",
    topology: "拓扑", noCalls: "这个节点上没有记录到设备插件调用（没有设备管理器，或插件还没注册）。",
    step: "第", of: "步，共", payload: "内容",
    steps: ["kubectl apply", "API Server", "调度器", "kubelet（agent）", "设备插件", "容器工具包（CDI）", "容器启动"],
    explain: [
      "客户端通过 HTTPS 把 Pod 发给 API Server。用 Docker 时你描述每一步；用 Kubernetes 时你描述最终状态，由集群去实现它。",
      "API Server 先认证（你是谁）、再鉴权（你能做什么）、再准入（默认值、校验、Pod 安全），然后把 Pod 写入存储并返回。此时 Pod 处于 Pending：还没有节点。resourceVersion 是这次写入在存储中的版本号。",
      "调度器发现一个未绑定的 Pod。过滤（Filter）去掉不能运行它的节点（nvidia.com/gpu 够不够？节点是否就绪？选择器、亲和性、污点）。打分（Score）给剩下的节点排序（最少/最多分配；同一 PCIe 交换机或 NVLink 相连的 GPU 得分更高）。绑定（Bind）把选中的节点写进 Pod。",
      "被选中节点上的 kubelet（skiff 的 agent）看到绑定给它的 Pod。它从不直接操作 GPU：它只负责协调，调用设备插件和容器运行时。",
      "设备管理器通过 unix socket 上的 gRPC，请设备插件为它从空闲且健康的设备中选出的 GPU 执行 Allocate。插件返回容器需要的内容：CDI 设备名、NVIDIA_VISIBLE_DEVICES 等环境变量、挂载。使用 DRA 时，由驱动的 NodePrepareResources 完成这一步。",
      "运行时解析 CDI 设备：NVIDIA Container Toolkit 的 CDI 规范把设备节点（/dev/nvidia0、/dev/nvidiactl…）、驱动库挂载和环境变量加入容器的 OCI 规范。",
      "容器启动；容器里的 nvidia-smi 只能看到分给它的 GPU。GPU 只能按 limits 申请，不能超售：一块 GPU 只属于一个容器。",
    ],
    seqLanes: ["kubectl", "API Server", "kubelet", "设备插件", "GPU + 工具包"],
    seq: {
      Register: "Register：插件向 kubelet 报告资源名和 socket",
      GetDevicePluginOptions: "GetDevicePluginOptions：插件支持哪些功能",
      ListAndWatch: "ListAndWatch：设备列表和健康状态",
      GetPreferredAllocation: "GetPreferredAllocation：插件偏好哪些设备",
      Allocate: "Allocate(设备 ID)",
      AllocateResponse: "AllocateResponse：环境变量、挂载、CDI 设备",
      PreStartContainer: "PreStartContainer",
      create: "创建 Pod", bound: "Pod 绑定到本节点", inject: "注入设备、驱动库、环境变量（CDI）", running: "容器运行",
      health: "健康状态变化",
    },
  },
};

let lang = localStorage.getItem("skiff-lang") === "zh" ? "zh" : "en";
const t = (k) => TEXT[lang][k] ?? TEXT.en[k] ?? k;

// ---------- helpers ----------

// h builds an element: h("div", {class: "x"}, "text", child...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// micros parses an RFC 3339 time with up to nanoseconds into microseconds
// since the epoch (Date keeps milliseconds only).
function micros(s) {
  if (!s) return NaN;
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(s);
  if (!m) return Date.parse(s) * 1000;
  const frac = ((m[2] || "") + "000000").slice(0, 6);
  return Date.parse(m[1] + m[3]) * 1000 + Number(frac);
}

// fmtMicros formats a duration of integer microseconds as "12.3ms"
// (tenths rounded half up; the browser test computes the same).
function fmtMicros(us) {
  if (!Number.isFinite(us)) return "-";
  const neg = us < 0;
  const tenths = Math.floor((Math.abs(us) + 50) / 100);
  return (neg ? "-" : "") + Math.floor(tenths / 10) + "." + (tenths % 10) + "ms";
}

const spanMicros = (s) => micros(s.end || s.start) - micros(s.start);
const clock = (s) => { const d = new Date(micros(s) / 1000); return Number.isNaN(d.getTime()) ? "-" : d.toISOString().slice(11, 23); };
const json = (v) => JSON.stringify(v, null, 2);

async function getJSON(path) {
  const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.message || r.status + " " + r.statusText);
  return body;
}

// fill replaces root's children, skipping the null ones.
function fill(root, ...children) {
  root.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

// ---------- the step player (chain and sequence views) ----------

// Player walks n steps: show(i) draws step i; Auto advances every 1.2 s.
class Player {
  constructor(n, show) { this.n = n; this.i = 0; this.show = show; this.timer = null; }
  set(n) { this.n = n; if (this.i >= n) this.i = Math.max(0, n - 1); this.show(this.i); }
  next() { if (this.i < this.n - 1) { this.i++; this.show(this.i); } else this.stop(); }
  prev() { if (this.i > 0) { this.i--; this.show(this.i); } }
  reset() { this.stop(); this.i = 0; this.show(0); }
  auto() {
    if (this.timer) { this.stop(); return; }
    this.timer = setInterval(() => this.next(), 1200);
    this.onauto?.(true);
  }
  stop() { if (this.timer) { clearInterval(this.timer); this.timer = null; this.onauto?.(false); } }
}

function controls(player, withPrev) {
  const autoBtn = h("button", { type: "button", id: "auto", onclick: () => player.auto() }, t("auto"));
  player.onauto = (on) => { autoBtn.textContent = on ? t("stop") : t("auto"); };
  return h("div", { class: "controls" },
    withPrev ? h("button", { type: "button", id: "prev", onclick: () => player.prev() }, t("prev")) : null,
    h("button", { type: "button", id: "next", onclick: () => player.next() }, t("next")),
    autoBtn,
    h("button", { type: "button", id: "reset", onclick: () => player.reset() }, t("reset")),
    h("span", { id: "stepno", class: "dim" }));
}

let currentPlayer = null;
document.addEventListener("keydown", (e) => {
  if (!currentPlayer || e.target.closest?.("select, input, textarea")) return;
  if (e.key === "ArrowRight" || (e.key === " " && e.target.tagName !== "BUTTON")) { e.preventDefault(); currentPlayer.next(); }
  else if (e.key === "ArrowLeft") { e.preventDefault(); currentPlayer.prev(); }
  else if (e.key === "a" || e.key === "A") currentPlayer.auto();
  else if (e.key === "r" || e.key === "R" || e.key === "Home") currentPlayer.reset();
});

// ---------- the chain view ----------

// chainSteps turns a trace into the course's seven steps, each with the
// spans it is drawn from.
function chainSteps(ch) {
  const spans = (ch.trace?.spans || []).map((s, i) => ({ ...s, index: i }));
  const by = (c, st) => spans.filter((s) => s.component === c && (!st || s.step === st));
  const last = (a) => a[a.length - 1];
  const api = by("apiserver", "create");
  const filters = by("scheduler", "filter");
  const filter = last(filters);
  const score = last(by("scheduler", "score"));
  const bind = last(by("scheduler", "bind"));
  const sched = spans.filter((s) => s.component === "scheduler" && filter && micros(s.start) >= micros(filter.start));
  const agent = by("agent");
  const create = last(agent.filter((s) => s.step === "create"));
  const prepare = last(agent.filter((s) => s.step === "prepare"));
  const start = last(agent.filter((s) => s.step === "start"));
  const before = agent.filter((s) => create ? micros(s.start) < micros(create.start) && s.step !== "prepare" : s.step !== "start" && s.step !== "prepare");
  return [
    { spans: [], at: ch.pod?.metadata?.creationTimestamp, pod: ch.pod },
    { spans: api, api: api[0] },
    { spans: sched, filter, score, bind, attempts: filters.length },
    { spans: before },
    { spans: prepare ? [prepare] : create ? [create] : [], prepare, allocate: create?.details?.allocate },
    { spans: create ? [create] : [], cdi: create?.details?.cdi },
    { spans: start ? [start] : [], start, pod: ch.pod },
  ];
}

function spanRows(spans) {
  return spans.map((s) => h("div", { class: "spanrow", "data-span": s.index },
    h("span", { class: "mono" }, clock(s.start)),
    h("span", { class: "mono" }, s.component + " " + s.step),
    h("span", { class: "dur mono", "data-duration": "" }, fmtMicros(spanMicros(s))),
    h("span", {}, s.node ? h("b", { "data-node": s.node }, s.node + " ") : null, s.message || "")));
}

function candidates(st) {
  const f = st.filter?.details || {};
  const sc = st.score?.details || {};
  const selected = sc.selected || st.bind?.node || "";
  const plugins = (sc.plugins || []).map((p) => p.name || p.Name || String(p));
  const scores = new Map((sc.nodes || []).map((n) => [n.node, n]));
  return h("div", { class: "candidates" }, (f.nodes || []).map((n) => {
    const s = scores.get(n.node);
    const chosen = n.node === selected;
    return h("div", { class: "candidate" + (chosen ? " chosen" : "") + (n.fit ? "" : " unfit"), "data-candidate": n.node, "data-fit": String(n.fit), "data-chosen": String(chosen) },
      h("div", { class: "name" }, n.node, chosen ? " ★ " + t("chosen") : ""),
      h("div", { class: n.fit ? "ok" : "bad", "data-filter": "" }, "Filter: ", n.fit ? t("fit") : t("unfit") + (n.plugin ? " (" + n.plugin + ")" : "")),
      (n.reasons || []).map((r) => h("div", { class: "bad", "data-reason": "" }, r)),
      s ? h("table", {}, h("tr", {}, h("th", {}, t("plugin")), h("th", {}, t("score"))),
        plugins.map((p, i) => h("tr", {}, h("td", {}, p), h("td", { class: "mono" }, String(s.normalized?.[i] ?? s.raw?.[i] ?? "")))),
        h("tr", {}, h("th", {}, t("total_")), h("th", { class: "mono", "data-total": "" }, String(s.total)))) : null);
  }));
}

function listBlock(title, items) {
  if (!items || !items.length) return null;
  return h("div", {}, h("h2", {}, title), h("pre", {}, items.join("\n")));
}

function stepBody(i, st, ch) {
  const body = [];
  if (i === 0) {
    const p = st.pod?.metadata || {};
    const mf = (p.managedFields || []).map((m) => m.manager).filter(Boolean);
    body.push(h("p", {}, "Pod ", h("b", {}, (p.namespace || "") + "/" + (p.name || "")), " · creationTimestamp ", h("span", { class: "mono" }, p.creationTimestamp || "-"), mf.length ? " · fieldManager " + mf.join(", ") : ""));
    const limits = (st.pod?.spec?.containers || []).map((c) => c.name + ": " + json(c.resources?.limits || {}));
    body.push(h("pre", {}, limits.join("\n")));
  }
  if (i === 1 && st.api) {
    body.push(h("p", {}, "resourceVersion ", h("b", { class: "big", "data-rv": "" }, st.api.details?.resourceVersion || "-"), " · uid ", h("span", { class: "mono" }, st.api.details?.uid || ch.pod?.metadata?.uid || "")));
  }
  if (i === 2) {
    if (!st.filter) body.push(h("p", { class: "warn" }, "Not scheduled yet."));
    else {
      if (st.attempts > 1) body.push(h("p", { class: "dim" }, st.attempts + " scheduling attempts; the last is shown."));
      body.push(h("p", {}, st.filter.message || ""), candidates(st));
    }
  }
  if (i === 4) {
    if (st.prepare) body.push(h("h2", {}, "NodePrepareResources (DRA)"), h("pre", {}, json(st.prepare.details || {})));
    for (const [res, a] of Object.entries(st.allocate || {})) {
      body.push(h("h2", {}, t("allocate") + " · " + res + " · " + (a.roundTripMs ?? "-") + " ms"),
        h("p", {}, t("devices") + ": ", (a.request || []).map((id) => h("code", { class: "device-id", "data-device": id }, id + " "))),
        h("pre", {}, json(a.response || {})));
    }
    if (!st.prepare && !st.allocate) body.push(h("p", { class: "dim" }, "No devices asked for (no nvidia.com/gpu limit, no claim)."));
  }
  if (i === 5) {
    const c = st.cdi;
    if (!c) body.push(h("p", { class: "dim" }, "No CDI devices for this container."));
    else body.push(h("p", {}, "CDI: ", (c.Devices || []).join(", ")), listBlock(t("deviceNodes"), c.DeviceNodes), listBlock(t("mounts"), c.Mounts), listBlock(t("env"), c.Env), listBlock("hooks", c.Hooks));
  }
  if (i === 6) {
    const cs = (st.pod?.status?.containerStatuses || []).map((s) => s.name + ": " + json(s.state || {}));
    body.push(h("p", {}, "phase ", h("b", {}, st.pod?.status?.phase || "-")), h("pre", {}, cs.join("\n")));
  }
  return body;
}

function pendingReasons(ch) {
  const cond = (ch.pod?.status?.conditions || []).find((c) => c.type === "PodScheduled" && c.status === "False");
  if (!cond) return null;
  return h("div", { class: "panel", id: "pending" }, h("h2", { class: "warn" }, t("pending")), h("p", { "data-pending-message": "" }, cond.message || cond.reason || ""));
}

function renderChain(root, ch, keepStep) {
  const steps = chainSteps(ch);
  const spans = ch.trace?.spans || [];
  const first = Math.min(...spans.map((s) => micros(s.start)));
  const lastEnd = Math.max(...spans.map((s) => micros(s.end || s.start)));
  const pill = steps.map((_, i) => h("div", { class: "pill", "data-pill": i }, (i + 1) + ". " + t("steps")[i]));
  const blocks = steps.map((st, i) => {
    const dur = st.spans.length ? Math.max(...st.spans.map((s) => micros(s.end || s.start))) - Math.min(...st.spans.map((s) => micros(s.start))) : NaN;
    return h("section", { class: "step panel", "data-step": i },
      h("h1", {}, (i + 1) + ". " + t("steps")[i]),
      h("p", { class: "when" }, st.spans.length ? clock(st.spans[0].start) + " · " : "", st.spans.length ? h("span", { "data-step-duration": "" }, fmtMicros(dur)) : ""),
      spanRows(st.spans), stepBody(i, st, ch));
  });
  const side = h("aside", { class: "panel side", id: "explain" });
  const stepno = () => document.getElementById("stepno");
  const player = new Player(steps.length, (i) => {
    blocks.forEach((b, j) => b.classList.toggle("shown", j === i));
    pill.forEach((p, j) => { p.classList.toggle("current", j === i); p.classList.toggle("done", j < i); });
    side.replaceChildren(h("h2", {}, t("steps")[i]), h("p", { lang: lang === "zh" ? "zh-CN" : "en" }, t("explain")[i]));
    if (stepno()) stepno().textContent = lang === "zh" ? `${t("step")} ${i + 1} ${t("of")} ${steps.length} 步` : `${t("step")} ${i + 1} ${t("of")} ${steps.length}`;
  });
  if (keepStep !== undefined) player.i = Math.min(keepStep, steps.length - 1);
  const pod = ch.pod?.metadata || {};
  fill(root,
    h("h1", {}, "Pod ", h("span", { id: "podname" }, pod.namespace + "/" + pod.name), " ", h("span", { class: "dim", id: "podphase" }, ch.pod?.status?.phase || "")),
    pendingReasons(ch),
    spans.length ? null : h("p", { class: "warn" }, t("noTrace")),
    controls(player, true),
    h("div", { class: "steps" }, pill),
    h("div", { class: "layout" }, h("div", {}, blocks), side),
    h("footer", { class: "chainfoot" },
      h("span", {}, t("total") + ": ", h("span", { class: "big", id: "e2e" }, spans.length ? fmtMicros(lastEnd - first) : "-")),
      h("span", {}, t("course") + ": ", h("span", { class: "big" }, "1–5 s"))));
  player.show(player.i);
  return player;
}

// ---------- the sequence view ----------

// lane indexes: 0 kubectl, 1 API server, 2 kubelet, 3 device plugin, 4 GPU + toolkit.
function seqMessages(calls, pods, node) {
  const S = t("seq");
  const msgs = [];
  let lastHealth = null;
  // A pod's submission and binding come before the first call made for it.
  const announced = new Set();
  const announce = (c) => {
    if (!c.pod || announced.has(c.pod)) return;
    announced.add(c.pod);
    const p = pods.get(c.pod);
    if (!p) return;
    msgs.push({ at: p.metadata.creationTimestamp, from: 0, to: 1, label: S.create + " " + c.pod, payload: { pod: c.pod } });
    const sc = (p.status?.conditions || []).find((x) => x.type === "PodScheduled" && x.status === "True");
    msgs.push({ at: sc?.lastTransitionTime || c.start, from: 1, to: 2, label: S.bound + " (" + node + ")", payload: { pod: c.pod, nodeName: p.spec?.nodeName } });
  };
  for (const c of calls) {
    announce(c);
    if (c.method === "ListAndWatch") {
      const devs = c.response?.devices || [];
      const health = new Map(devs.map((d) => [d.id, d.health]));
      const changed = lastHealth ? devs.filter((d) => lastHealth.get(d.id) !== d.health) : [];
      const label = changed.length ? S.health + ": " + changed.map((d) => d.id + " → " + d.health).join(", ") : S.ListAndWatch + " (" + devs.length + ")";
      msgs.push({ at: c.start, from: 3, to: 2, label, payload: c.response, health: changed.length > 0, call: c });
      lastHealth = health;
      continue;
    }
    if (c.method === "Register") { msgs.push({ at: c.start, from: 3, to: 2, label: S.Register, payload: c.request, call: c }); continue; }
    if (c.method === "Allocate" && c.pod) {
      const p = pods.get(c.pod);
      msgs.push({ at: c.start, from: 2, to: 3, label: S.Allocate, payload: c.request, call: c, dur: micros(c.end) - micros(c.start) });
      msgs.push({ at: c.end, from: 3, to: 2, label: S.AllocateResponse, payload: c.response || { error: c.error }, call: c });
      msgs.push({ at: c.end, from: 2, to: 4, label: S.inject, payload: c.response });
      const run = (p?.status?.containerStatuses || []).map((s) => s.state?.running?.startedAt || s.state?.terminated?.startedAt).find(Boolean);
      if (run) msgs.push({ at: run, from: 4, to: 2, label: S.running + " " + c.pod, payload: { startedAt: run } });
      continue;
    }
    msgs.push({ at: c.start, from: c.from === "plugin" ? 3 : 2, to: c.from === "plugin" ? 2 : 3, label: S[c.method] || c.method, payload: { request: c.request, response: c.response, error: c.error }, call: c, dur: micros(c.end) - micros(c.start) });
  }
  return msgs;
}

function renderSequence(root, node, data, pods) {
  const msgs = seqMessages(data.calls || [], pods, node);
  const detail = h("aside", { class: "panel side", id: "seq-detail" });
  const rows = msgs.map((m, i) => {
    const lo = Math.min(m.from, m.to), hi = Math.max(m.from, m.to);
    // Column 1 is the time; lanes are columns 2..6 (classes, not inline
    // styles: the page's Content-Security-Policy allows no inline style).
    const arrow = h("div", { class: `arrow ${m.to < m.from ? "left" : "right"} cs${lo + 2} ce${hi + 3}` }, m.label, m.dur >= 0 ? " · " + fmtMicros(m.dur) : "");
    return h("div", { class: "msg" + (m.health ? " health" : ""), "data-msg": i, "data-method": m.call?.method || "", tabindex: "0", onclick: () => player.show((player.i = i)) },
      h("span", { class: "t mono" }, clock(m.at)), arrow);
  });
  const player = new Player(msgs.length, (i) => {
    rows.forEach((r, j) => { r.classList.toggle("shown", j <= i); r.classList.toggle("current", j === i); });
    const m = msgs[i];
    if (m) {
      detail.replaceChildren(h("h2", {}, m.label), h("p", { class: "mono" }, clock(m.at), m.dur >= 0 ? " · " + fmtMicros(m.dur) : ""),
        h("h2", {}, t("payload")), h("pre", {}, json(m.payload ?? {})));
      rows[i].scrollIntoView({ block: "nearest" });
    }
    const no = document.getElementById("stepno");
    if (no) no.textContent = `${i + 1} / ${msgs.length}`;
  });
  fill(root,
    h("h1", {}, t("nav.sequence") + " · ", h("span", { id: "seqnode" }, node)),
    nodePicker(node),
    msgs.length ? controls(player, true) : h("p", { class: "dim" }, t("noCalls")),
    h("div", { class: "layout" },
      h("div", { class: "seq" }, h("div", { class: "lanes" }, h("div", {}), t("seqLanes").map((l) => h("div", {}, l))), rows),
      detail));
  if (msgs.length) player.show(0);
  return player;
}

function nodePicker(current) {
  const names = [...store.get("nodes").keys()].sort();
  return h("div", { class: "controls" }, h("label", {}, t("pickNode") + " ",
    h("select", { id: "nodepick", onchange: (e) => { location.hash = "#/sequence/" + e.target.value; } },
      names.map((n) => h("option", { value: n, selected: n === current }, n)))));
}

// ---------- the live store, fed by the event stream ----------

const store = new Map(); // resource → Map(ns/name → object)
for (const k of ["nodes", "pods", "deployments", "replicasets", "jobs", "clusterqueues", "localqueues", "workloads", "resourceclaims", "horizontalpodautoscalers"]) store.set(k, new Map());
let servedKinds = [];
const reconciles = new Map(); // controller → its newest records (one ring each: no loop's no-ops crowd out another's)
const keyOf = (o) => (o.metadata.namespace ? o.metadata.namespace + "/" : "") + o.metadata.name;
const listeners = new Set(); // (kind, type, object) → void

function connect() {
  const es = new EventSource("api/watch");
  const live = document.getElementById("live");
  es.onopen = () => { live.textContent = "● " + t("live"); live.className = "live ok"; };
  es.onerror = () => { live.textContent = t("offline"); live.className = "live warn"; };
  es.addEventListener("kinds", (e) => { servedKinds = JSON.parse(e.data); });
  es.addEventListener("reset", (e) => { const k = JSON.parse(e.data).kind; store.get(k)?.clear(); emit(k, "reset", null); });
  for (const type of ["ADDED", "MODIFIED", "DELETED"]) {
    es.addEventListener(type, (e) => {
      const { kind, object } = JSON.parse(e.data);
      const m = store.get(kind);
      if (!m) return;
      if (type === "DELETED") m.delete(keyOf(object)); else m.set(keyOf(object), object);
      emit(kind, type, object);
    });
  }
  es.addEventListener("reconcile", (e) => {
    const r = JSON.parse(e.data);
    if (!reconciles.has(r.controller)) reconciles.set(r.controller, []);
    const ring = reconciles.get(r.controller);
    ring.push(r);
    if (ring.length > 1000) ring.shift();
    emit("reconcile", "ADDED", r);
  });
}

function emit(kind, type, obj) { for (const l of listeners) l(kind, type, obj); }

// ---------- the cluster view ----------

function gpuInfo(node) {
  const a = node.metadata.annotations || {};
  let topo = null, alloc = {};
  try { topo = JSON.parse(a["skiff.dev/gpu-topology"] || "null"); } catch { topo = null; }
  try { alloc = JSON.parse(a["skiff.dev/gpu-allocations"] || "{}"); } catch { alloc = {}; }
  let shared = [];
  try { shared = (JSON.parse(a["skiff.dev/gpu-devices"] || "null")?.devices || []).filter((d) => d.sharing !== "none"); } catch { shared = []; }
  return { topo, alloc, shared };
}

// subDevices: a GPU split into its replicas, MPS shares or MIG devices
// (annotation skiff.dev/gpu-devices): what each holder may use and who holds it.
function subDevices(shared, index) {
  const mine = shared.filter((d) => d.gpu === index);
  if (!mine.length) return null;
  return h("div", { class: "subdevs", "data-subdevices": String(mine.length) }, mine.map((d) => {
    const name = d.profile ? "MIG " + d.profile : d.sharing + " " + (d.id.includes("::") ? "#" + d.id.split("::").pop() : "");
    return h("div", { class: "subdev" + (d.holder ? " held" : ""), "data-subdevice": d.id, "data-holder": d.holder || "", title: d.id + " · " + d.resource },
      h("b", {}, name), " ", h("span", { class: "dim" }, d.memoryMiB + " MiB · " + d.smPercent + "% SM"),
      h("div", {}, d.holder ? d.holder : h("span", { class: "dim" }, t("free"))));
  }));
}

const linkName = (l) => (l?.nvlinks > 0 ? "NV" + l.nvlinks : l?.pcie && l.pcie !== "N/A" ? l.pcie : "X");

function nodeCard(node) {
  const { topo, alloc, shared } = gpuInfo(node);
  const ready = (node.status?.conditions || []).find((c) => c.type === "Ready");
  const devs = topo?.devices || [];
  const gpus = devs.map((d) => {
    const holder = alloc[d.uuid];
    return h("div", { class: "gpu" + (d.healthy ? "" : " unhealthy") + (holder ? " held" : ""), "data-gpu": d.uuid, "data-healthy": String(d.healthy), "data-holder": holder || "" },
      h("b", {}, "GPU " + d.index), " ", d.healthy ? h("span", { class: "ok" }, "✓") : h("span", { class: "bad" }, "✗ Xid " + (d.lastXid || "")),
      h("div", { class: "mono" }, d.uuid.slice(0, 12) + "…"),
      h("div", {}, holder ? t("held") + " " + holder : h("span", { class: "dim" }, t("free"))),
      subDevices(shared, d.index));
  });
  let matrix = null;
  if (topo?.topology?.links?.length) {
    const L = topo.topology.links;
    matrix = h("details", {}, h("summary", {}, t("topology") + " (nvidia-smi topo -m)"),
      h("table", { class: "matrix" }, h("tr", {}, h("th", {}), L.map((_, j) => h("th", {}, "GPU" + j))),
        L.map((row, i) => h("tr", {}, h("th", {}, "GPU" + i), row.map((l, j) => h("td", { class: l?.nvlinks > 0 ? "nv" : "" }, i === j ? "X" : linkName(l)))))));
  }
  const cap = node.status?.capacity || {}, al = node.status?.allocatable || {};
  return h("div", { class: "panel node", "data-node-card": node.metadata.name },
    h("h2", {}, node.metadata.name, " ", h("span", { class: ready?.status === "True" ? "ok" : "bad" }, ready?.status === "True" ? "Ready" : "NotReady"),
      " ", h("a", { href: "#/sequence/" + node.metadata.name, class: "dim" }, "gRPC →")),
    h("div", { class: "dim" }, Object.keys(cap).filter((r) => r.startsWith("nvidia.com/")).sort().concat(cap["nvidia.com/gpu"] === undefined ? ["nvidia.com/gpu"] : [])
      .map((r) => r + " " + (al[r] ?? 0) + "/" + (cap[r] ?? 0)).join(" · ") + " · cpu " + (al.cpu ?? "-") + " · memory " + (al.memory ?? "-")),
    devs.length ? h("div", { class: "gpus" }, gpus) : h("p", { class: "dim" }, "no GPUs"), matrix);
}

function podLine(p) {
  const sc = (p.status?.conditions || []).find((c) => c.type === "PodScheduled" && c.status === "False");
  const key = p.metadata.namespace + "/" + p.metadata.name;
  return h("div", { class: "pod", "data-pod": key, "data-phase": p.status?.phase || "Pending" },
    h("a", { href: "#/chain/" + key }, key), " ", h("span", { class: "dim" }, p.spec?.nodeName || ""),
    p.metadata.deletionTimestamp ? h("span", { class: "warn" }, " Terminating") : null,
    sc ? h("div", { class: "warn", "data-pending-reason": "" }, sc.message || sc.reason) : null);
}

function table(title, kind, cols) {
  if (!servedKinds.includes(kind)) return null;
  const rows = [...store.get(kind).values()];
  return h("div", { class: "panel", "data-kind": kind }, h("h2", {}, title + " (" + rows.length + ")"),
    rows.length ? h("table", {}, h("tr", {}, cols.map((c) => h("th", {}, c[0]))), rows.map((o) => h("tr", {}, cols.map((c) => h("td", { class: "mono" }, String(c[1](o) ?? "")))))) : h("p", { class: "dim" }, "—"));
}

function renderCluster(root) {
  const nodes = [...store.get("nodes").values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const pods = [...store.get("pods").values()].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  const phases = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
  const by = new Map(phases.map((p) => [p, []]));
  for (const p of pods) (by.get(p.status?.phase || "Pending") || by.get("Unknown")).push(p);
  const usage = (cq) => (cq.status?.flavorsUsage || []).map((f) => f.name + ": " + (f.resources || []).map((r) => r.name + "=" + r.total).join(" ")).join("; ");
  fill(root,
    h("h1", {}, t("nodes")), h("div", { class: "nodes" }, nodes.map(nodeCard)),
    h("h1", {}, t("pods")), h("div", { class: "phases" }, phases.map((ph) => h("div", { class: "panel phase", "data-phase-list": ph }, h("h2", {}, ph + " (" + by.get(ph).length + ")"), by.get(ph).map(podLine)))),
    h("div", { class: "phases" },
      table(t("queues") + " · ClusterQueue", "clusterqueues", [["name", (o) => o.metadata.name], ["admitted", (o) => o.status?.admittedWorkloads], ["pending", (o) => o.status?.pendingWorkloads], ["usage", usage]]),
      table("LocalQueue", "localqueues", [["name", keyOf], ["clusterQueue", (o) => o.spec?.clusterQueue], ["pending", (o) => o.status?.pendingWorkloads], ["admitted", (o) => o.status?.admittedWorkloads]]),
      table(t("workloads"), "workloads", [["name", keyOf], ["queue", (o) => o.spec?.queueName], ["admitted", (o) => (o.status?.conditions || []).some((c) => c.type === "Admitted" && c.status === "True")]]),
      table(t("claims"), "resourceclaims", [["name", keyOf], ["allocated", (o) => (o.status?.allocation?.devices?.results || []).map((r) => r.device).join(", ")], ["reservedFor", (o) => (o.status?.reservedFor || []).map((r) => r.name).join(", ")]]),
      table(t("jobs"), "jobs", [["name", keyOf], ["active", (o) => o.status?.active ?? 0], ["succeeded", (o) => o.status?.succeeded ?? 0], ["suspend", (o) => o.spec?.suspend ?? false]])));
}

// ---------- the control-loop view ----------

function recLine(r, fresh) {
  return h("div", { class: "rec" + (r.acted ? "" : " noop") + (fresh ? " fresh" : ""), "data-rec": r.seq, "data-controller": r.controller, "data-desired": r.desired, "data-acted": String(r.acted) },
    h("span", { class: "mono" }, clock(r.time)), h("b", {}, r.controller), h("span", { class: "mono" }, r.key),
    h("span", {}, h("span", { class: "dim" }, t("observed") + ": "), r.observed), h("span", {}, h("span", { class: "dim" }, t("desired") + ": "), r.desired),
    h("span", {}, h("span", { class: "dim" }, t("action") + ": "), r.action));
}

function renderLoops(root) {
  const all = localStorage.getItem("skiff-loops-all") === "1";
  const shown = (r) => all || r.controller === "deployment-controller" || r.controller === "replicaset-controller";
  const recs = [...reconciles.values()].flat().filter(shown).sort((a, b) => a.seq - b.seq);
  const list = h("div", { id: "recs" }, recs.slice(-200).reverse().map((r) => recLine(r, false)));
  const objs = (kind) => [...store.get(kind).values()].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  fill(root,
    h("h1", {}, t("nav.loops")),
    h("div", { class: "phases" },
      h("div", { class: "panel phase" }, h("h2", {}, t("deployments")), h("table", {}, h("tr", {}, h("th", {}, "name"), h("th", {}, "desired"), h("th", {}, "ready"), h("th", {}, "updated")),
        objs("deployments").map((d) => h("tr", { "data-deploy": keyOf(d) }, h("td", {}, keyOf(d)), h("td", {}, String(d.spec?.replicas ?? 1)), h("td", {}, String(d.status?.readyReplicas ?? 0)), h("td", {}, String(d.status?.updatedReplicas ?? 0)))))),
      h("div", { class: "panel phase" }, h("h2", {}, t("replicasets")), h("table", {}, h("tr", {}, h("th", {}, "name"), h("th", {}, "desired"), h("th", {}, "ready")),
        objs("replicasets").map((d) => h("tr", {}, h("td", {}, keyOf(d)), h("td", {}, String(d.spec?.replicas ?? 1)), h("td", {}, String(d.status?.readyReplicas ?? 0))))))),
    h("label", {}, h("input", { type: "checkbox", id: "allctl", checked: all, onchange: (e) => { localStorage.setItem("skiff-loops-all", e.target.checked ? "1" : "0"); renderLoops(root); } }), " " + t("controllers")),
    list);
  return { add(r) { if (shown(r)) list.prepend(recLine(r, true)); } };
}

// ---------- routing ----------

let unsubscribe = () => {};
let routes = 0; // how many times route ran: the current view's number

function route() {
  const root = document.getElementById("main");
  currentPlayer?.stop();
  currentPlayer = null;
  unsubscribe();
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  const view = parts[0] || "cluster";
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.view === view));
  // A view's late work (a redraw still in its debounce, a fetch answered
  // after the user moved on) must not draw over the next view.
  const self = ++routes;
  const current = () => self === routes;
  let pending = 0;
  const on = (f) => { listeners.add(f); unsubscribe = () => { listeners.delete(f); clearTimeout(pending); }; };
  // A burst of events (a scale to 50) is drawn once, 30 ms after its last.
  const debounce = (f) => { clearTimeout(pending); pending = setTimeout(() => { if (current()) f(); }, 30); };
  // getJSON for this view: a stale answer (or error) never settles.
  const viewJSON = (path) => getJSON(path).then(
    (v) => (current() ? v : new Promise(() => {})),
    (e) => (current() ? Promise.reject(e) : new Promise(() => {})));
  if (view === "chain") {
    const [ns, name] = [parts[1], parts[2]];
    if (!ns || !name) {
      const pods = [...store.get("pods").keys()].sort();
      fill(root, h("h1", {}, t("pickPod")), pods.map((k) => h("div", { class: "pod" }, h("a", { href: "#/chain/" + k }, k))));
      on((kind) => { if (kind === "pods") debounce(route); });
      return;
    }
    const load = () => viewJSON(`api/chain/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`)
      .then((ch) => { const keep = currentPlayer?.i; currentPlayer = renderChain(root, ch, keep); })
      .catch((e) => fill(root, h("p", { class: "bad" }, e.message)));
    load();
    on((kind, type, o) => { if (kind === "pods" && o && keyOf(o) === ns + "/" + name) debounce(load); });
    return;
  }
  if (view === "sequence") {
    const node = parts[1] || [...store.get("nodes").keys()].sort()[0];
    if (!node) { fill(root, h("p", { class: "dim" }, t("pickNode"))); on((k) => { if (k === "nodes") debounce(route); }); return; }
    const load = () => viewJSON(`api/devices/${encodeURIComponent(node)}`)
      .then((d) => { const keep = currentPlayer?.i; currentPlayer = renderSequence(root, node, d, store.get("pods")); if (keep !== undefined && currentPlayer.n) currentPlayer.show((currentPlayer.i = Math.min(keep, currentPlayer.n - 1))); })
      .catch((e) => fill(root, h("h1", {}, node), nodePicker(node), h("p", { class: "bad" }, e.message)));
    load();
    // The agent rewrites its node's GPU annotations on every health or
    // allocation change: that is when the call log has news.
    on((kind, type, o) => { if (kind === "nodes" && o?.metadata?.name === node) debounce(load); });
    return;
  }
  if (view === "hpa") {
    const [ns, name] = [parts[1], parts[2]];
    if (!ns || !name) {
      hpaPicker(root);
      on((kind) => { if (kind === "horizontalpodautoscalers") debounce(() => hpaPicker(root)); });
      return;
    }
    const key = ns + "/" + name;
    const load = () => viewJSON(`api/hpa/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`)
      .then((v) => renderHPA(root, v))
      .catch((e) => fill(root, h("h1", {}, key), h("p", { class: "bad" }, e.message)));
    load();
    // The controller posts a decision, then logs its reconcile line (and
    // writes the status when it changed): either is the plot's news.
    on((kind, type, o) => {
      if ((kind === "reconcile" && o.controller === "horizontal-pod-autoscaler" && o.key === key) ||
        (kind === "horizontalpodautoscalers" && o && keyOf(o) === key)) debounce(load);
    });
    return;
  }
  if (view === "loops") {
    const v = renderLoops(root);
    on((kind, type, o) => { if (kind === "reconcile") v.add(o); else if (kind === "deployments" || kind === "replicasets") debounce(() => renderLoops(root)); });
    return;
  }
  renderCluster(root);
  on((kind) => { if (kind !== "reconcile") debounce(() => renderCluster(root)); });
}

function applyLang() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.querySelectorAll("[data-i18n]").forEach((el) => { el.textContent = t(el.dataset.i18n); });
  const b = document.getElementById("lang");
  if (b) b.textContent = lang === "zh" ? "English" : "中文";
}

function start() {
  document.getElementById("lang").addEventListener("click", () => {
    lang = lang === "zh" ? "en" : "zh";
    localStorage.setItem("skiff-lang", lang);
    applyLang();
    if (standalone) currentPlayer = renderChain(document.getElementById("main"), standalone, currentPlayer?.i); else route();
  });
  applyLang();
  if (standalone) {
    document.querySelector("nav")?.remove();
    currentPlayer = renderChain(document.getElementById("main"), standalone);
    return;
  }
  connect();
  window.addEventListener("hashchange", route);
  route();
}

// The chain of a `skiff trace pod -o html` file, when this is one.
const embedded = document.getElementById("skiff-chain");
const standalone = embedded ? JSON.parse(embedded.textContent) : null;
start();
