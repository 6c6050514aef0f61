package api

// Version is the skiff release: `skiff version` prints it, the API server
// serves it at /version (beside the Kubernetes version it speaks), and
// every skiff client sends it in its User-Agent (client.UserAgent).
const Version = "v0.1.0"
