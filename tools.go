//go:build tools

// Package main's tools.go pins the design brief's dependencies in go.mod
// while the packages that use them are being written. Remove an import here
// once real code imports the package.
package main

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	_ "github.com/containerd/containerd/v2/client"
	_ "github.com/containernetworking/cni/libcni"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/bbolt"
	_ "google.golang.org/grpc"
	_ "k8s.io/apimachinery/pkg/api/resource"
	_ "k8s.io/apimachinery/pkg/labels"
	_ "k8s.io/client-go/util/jsonpath"
	_ "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	_ "sigs.k8s.io/yaml"
	_ "tags.cncf.io/container-device-interface/pkg/cdi"
)
