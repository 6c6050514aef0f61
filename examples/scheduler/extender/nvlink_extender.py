#!/usr/bin/env python3
"""A scheduler extender in Python, standard library only.

kube-scheduler (and skiff's scheduler) POST each pending pod and the nodes
that passed their own filters here, as JSON (k8s.io/kube-scheduler/extender/v1:
keys are Go field names: "Pod", "Nodes"). This one prefers nodes whose free
GPUs form a big NVLink-connected group, read from the annotation every skiff
node publishes (skiff.dev/gpu-topology: the GPUs, their link matrix, which are
free):

  /filter      keeps the nodes with as many NVLink-connected free GPUs as the
               pod asks for (nvidia.com/gpu); the others get a reason
  /prioritize  scores every node 0..10 by the size of that group

Run it, then point the scheduler at it (scheduler-config.yaml beside it):

  python3 examples/scheduler/extender/nvlink_extender.py --port 8888
  sudo bin/skiff up --nodes 2 --gpus sim:dgxa100,sim:dgxa100 \\
      --scheduler-config examples/scheduler/extender/scheduler-config.yaml
  skiff describe pod POD     # the extender's filter verdict and score per node
"""
import argparse
import json
from http.server import BaseHTTPRequestHandler, HTTPServer

ANNOTATION = "skiff.dev/gpu-topology"


def nvlink_group(node):
    """Size of the largest group of free GPUs joined by NVLink links."""
    raw = node.get("metadata", {}).get("annotations", {}).get(ANNOTATION)
    if not raw:
        return 0
    gpus = json.loads(raw)
    free, links = set(gpus.get("free") or []), gpus["topology"]["links"]
    best, seen = 0, set()
    for start in free - seen:
        group, todo = set(), [start]
        while todo:
            g = todo.pop()
            if g not in group:
                group.add(g)
                todo += [h for h in free if links[g][h].get("nvlinks", 0) > 0]
        seen |= group
        best = max(best, len(group))
    return best


def gpus_wanted(pod):
    want = 0
    for c in pod["spec"]["containers"]:
        limits = c.get("resources", {}).get("limits", {})
        want += int(limits.get("nvidia.com/gpu", 0))
    return want


class Extender(BaseHTTPRequestHandler):
    def do_POST(self):
        args = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        nodes, want = args["Nodes"]["items"], gpus_wanted(args["Pod"])
        if self.path.endswith("/filter"):
            ok = [n for n in nodes if nvlink_group(n) >= want]
            names = {n["metadata"]["name"] for n in ok}
            failed = {n["metadata"]["name"]: f"node(s) had fewer than {want} free NVLink-connected GPUs"
                      for n in nodes if n["metadata"]["name"] not in names}
            answer = {"Nodes": {"items": ok}, "FailedNodes": failed, "Error": ""}
        elif self.path.endswith("/prioritize"):
            answer = [{"Host": n["metadata"]["name"], "Score": min(10, nvlink_group(n) * 10 // 8)}
                      for n in nodes]
        else:
            self.send_error(404)
            return
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8888, help="0: any free port")
    p.add_argument("--host", default="127.0.0.1")
    a = p.parse_args()
    server = HTTPServer((a.host, a.port), Extender)
    print(f"nvlink extender listening on http://{a.host}:{server.server_port}", flush=True)
    server.serve_forever()
