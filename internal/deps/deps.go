//go:build tools

// Package deps pins the modules the project builds on while packages land.
package deps

import (
	_ "github.com/containerd/cgroups/v3/cgroup1"
	_ "github.com/containerd/cgroups/v3/cgroup2"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/coreos/go-systemd/v22/dbus"
	_ "github.com/creack/pty"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/godbus/dbus/v5"
	_ "github.com/invopop/jsonschema"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/apimachinery/pkg/util/validation"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/client-go/util/workqueue"
	_ "k8s.io/utils/clock"
	_ "pgregory.net/rapid"
	_ "sigs.k8s.io/yaml"
)
