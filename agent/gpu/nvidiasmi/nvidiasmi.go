// Package nvidiasmi writes a simulated nvidia-smi: a small POSIX sh script
// (it runs under busybox sh and dash) that prints what the real tool prints
// for the GPUs a container was given. Inside a container of a simulated
// node, `nvidia-smi` then shows exactly the allocated GPUs, renumbered from 0
// the way the real tool numbers them inside a container, and says in its
// first line that they are simulated.
//
// The script knows its GPUs from records, one per GPU: lines of sh
// variables (GPU_NAME=..., GPU_LINK_3=NV12, ...) written by [Record]. Two
// forms:
//
//   - [Script]: the records are inside the script; one script per set of GPUs.
//   - [DirScript]: the records are files in a directory, one per GPU
//     (gpu-03.env for host GPU 3), read when the script runs. The CDI spec of
//     a simulated node mounts one file per allocated device into that
//     directory, so one script shows any allocation (see agent/gpu/cdi).
//
// Supported: the default table, -L, topo -m, --query-gpu=FIELDS
// --format=csv[,noheader][,nounits] with the fields index, name, uuid,
// memory.total, memory.used, memory.free, pci.bus_id, driver_version,
// temperature.gpu, utilization.gpu, power.draw, power.limit, compute_cap,
// count.
package nvidiasmi

import (
	"fmt"
	"sort"
	"strings"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/api/gputopology"
)

// Banner is the first line of every output but csv and -L, which scripts
// parse: the GPUs are not real.
const Banner = "skiff simulated GPU: these GPUs are simulated by skiff; nvidia-smi is a script"

// RecordName is the file name of host GPU index's record in a DirScript
// directory. Zero-padded so that the shell's sorted glob keeps host order.
func RecordName(index int) string { return fmt.Sprintf("gpu-%02d.env", index) }

// Record is the sh record of one GPU: its facts, fake but plausible sensor
// values, and its links to the other GPUs of the host (GPU_LINK_<host
// index>). driver and cuda, when not empty, replace the device's versions.
func Record(d gpu.Device, topo *gputopology.Topology, driver, cuda string) []byte {
	if driver == "" {
		driver = d.DriverVersion
	}
	if cuda == "" {
		cuda = d.CUDAVersion
	}
	powerCap := powerLimit(d.Name)
	vars := [][2]string{
		{"GPU_INDEX", fmt.Sprint(d.Index)},
		{"GPU_NAME", d.Name},
		{"GPU_UUID", d.UUID},
		{"GPU_BUS", d.PCIBusID},
		{"GPU_MEM_TOTAL", fmt.Sprint(d.MemoryMiB)},
		{"GPU_MEM_USED", fmt.Sprint(d.MemoryMiB - min(d.FreeMiB, d.MemoryMiB))},
		{"GPU_TEMP", fmt.Sprint(30 + (d.Index*7)%9)}, // idle, a little different per GPU
		{"GPU_POWER", fmt.Sprint(powerCap * 15 / 100)},
		{"GPU_POWER_CAP", fmt.Sprint(powerCap)},
		{"GPU_UTIL", "0"},
		{"GPU_CC", fmt.Sprintf("%d.%d", d.ComputeMajor, d.ComputeMinor)},
		{"GPU_NUMA", numa(d.NUMANode)},
		{"GPU_CPUS", orNA(d.CPUAffinity)},
		{"GPU_DRIVER", driver},
		{"GPU_CUDA", cuda},
	}
	for j := 0; j < topo.N(); j++ {
		if j != d.Index {
			vars = append(vars, [2]string{fmt.Sprintf("GPU_LINK_%d", j), topo.Link(d.Index, j).String()})
		}
	}
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v[0], quote(v[1]))
	}
	return []byte(b.String())
}

// Script is a self-contained nvidia-smi for the given GPUs (host numbering
// in Device.Index, matrix topo of the host), shown as GPU 0..n-1.
func Script(gpus []gpu.Device, topo *gputopology.Topology, driver, cuda string) []byte {
	sorted := append([]gpu.Device(nil), gpus...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Index < sorted[b].Index })
	var b strings.Builder
	b.WriteString(header)
	for k, d := range sorted {
		fmt.Fprintf(&b, "rec_%d() {\n%s}\n", k, Record(d, topo, driver, cuda))
	}
	fmt.Fprintf(&b, "SKIFF_N=%d\nload() { rec_$1; }\n", len(sorted))
	b.WriteString(body)
	return []byte(b.String())
}

// DirScript is an nvidia-smi that shows the GPUs whose records (RecordName)
// are in dir when it runs.
func DirScript(dir string) []byte {
	return []byte(header + fmt.Sprintf(`SKIFF_N=0
for f in %s/gpu-*.env; do
	[ -f "$f" ] || continue
	eval "F_$SKIFF_N=\$f"
	SKIFF_N=$((SKIFF_N + 1))
done
load() { eval ". \"\$F_$1\""; }
`, quote(dir)) + body)
}

// powerLimit is the board power of known models, in W.
func powerLimit(name string) int {
	for _, m := range []struct {
		model string
		watts int
	}{{"A100-SXM", 400}, {"A100-PCIE", 250}, {"H100", 700}, {"H200", 700}, {"B200", 1000},
		{"RTX 4090", 450}, {"RTX 3090", 350}} {
		if strings.Contains(name, m.model) {
			return m.watts
		}
	}
	return 300
}

func numa(n int) string {
	if n < 0 {
		return "N/A"
	}
	return fmt.Sprint(n)
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

// quote makes s one sh word: 'it'\”s'.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

const header = `#!/bin/sh
# nvidia-smi, simulated by skiff (agent/gpu/nvidiasmi): the GPUs are not real.
# Each GPU is a record of sh variables; load K sets them for GPU K.
`

// body is the part of the script that prints; it needs SKIFF_N and load.
const body = `
banner() { echo "` + Banner + `"; }

table() {
	banner
	date '+%a %b %e %H:%M:%S %Y'
	load 0
	echo '+-----------------------------------------------------------------------------------------+'
	printf '| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n' "$GPU_DRIVER" "$GPU_DRIVER" "$GPU_CUDA"
	echo '|-----------------------------------------+------------------------+----------------------+'
	echo '| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |'
	echo '| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |'
	echo '|                                         |                        |               MIG M. |'
	echo '|=========================================+========================+======================|'
	k=0
	while [ "$k" -lt "$SKIFF_N" ]; do
		load "$k"
		printf '|%4d  %-29.29s%4s  |%19s %3s |%21s |\n' "$k" "$GPU_NAME" On "$GPU_BUS" Off 0
		printf '| N/A  %3sC    P0%15sW / %4sW |%8sMiB / %6sMiB |%7s%%%13s |\n' \
			"$GPU_TEMP" "$GPU_POWER" "$GPU_POWER_CAP" "$GPU_MEM_USED" "$GPU_MEM_TOTAL" "$GPU_UTIL" Default
		printf '|%41s|%24s|%21s |\n' '' '' Disabled
		echo '+-----------------------------------------+------------------------+----------------------+'
		k=$((k + 1))
	done
	echo
	echo '+-----------------------------------------------------------------------------------------+'
	echo '| Processes:                                                                              |'
	echo '|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |'
	echo '|        ID   ID                                                               Usage      |'
	echo '|=========================================================================================|'
	echo '|  No running processes found                                                             |'
	echo '+-----------------------------------------------------------------------------------------+'
}

list() {
	k=0
	while [ "$k" -lt "$SKIFF_N" ]; do
		load "$k"
		echo "GPU $k: $GPU_NAME (UUID: $GPU_UUID)"
		k=$((k + 1))
	done
}

topo() {
	banner
	k=0
	while [ "$k" -lt "$SKIFF_N" ]; do
		load "$k"
		eval "H_$k=\$GPU_INDEX"
		printf '\tGPU%d' "$k"
		k=$((k + 1))
	done
	printf '\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n'
	k=0
	while [ "$k" -lt "$SKIFF_N" ]; do
		load "$k"
		printf 'GPU%d' "$k"
		m=0
		while [ "$m" -lt "$SKIFF_N" ]; do
			if [ "$m" -eq "$k" ]; then
				cell=' X '
			else
				eval "h=\$H_$m"
				eval "cell=\${GPU_LINK_$h:-SYS}"
			fi
			printf '\t%s' "$cell"
			m=$((m + 1))
		done
		printf '\t%s\t%s\tN/A\n' "$GPU_CPUS" "$GPU_NUMA"
		k=$((k + 1))
	done
	cat <<'LEGEND'

` + gputopology.Legend + `LEGEND
}

# field NAME UNITS: prints the header (when K is -1) or the value of GPU K.
field() {
	case "$1" in
	index) h=index v=$k ;;
	count) h=count v=$SKIFF_N ;;
	name) h=name v=$GPU_NAME ;;
	uuid) h=uuid v=$GPU_UUID ;;
	pci.bus_id) h=pci.bus_id v=$GPU_BUS ;;
	driver_version) h=driver_version v=$GPU_DRIVER ;;
	compute_cap) h=compute_cap v=$GPU_CC ;;
	memory.total) h='memory.total [MiB]' v=$GPU_MEM_TOTAL u=' MiB' ;;
	memory.used) h='memory.used [MiB]' v=$GPU_MEM_USED u=' MiB' ;;
	memory.free) h='memory.free [MiB]' v=$((GPU_MEM_TOTAL - GPU_MEM_USED)) u=' MiB' ;;
	temperature.gpu) h=temperature.gpu v=$GPU_TEMP ;;
	utilization.gpu) h='utilization.gpu [%]' v=$GPU_UTIL u=' %' ;;
	power.draw) h='power.draw [W]' v="$GPU_POWER.00" u=' W' ;;
	power.limit) h='power.limit [W]' v="$GPU_POWER_CAP.00" u=' W' ;;
	*) echo "Field \"$1\" is not a valid field to query." >&2; exit 2 ;;
	esac
}

query() {
	fields=$1 format=$2
	case ",$format," in *,csv,*) ;; *) echo 'Only --format=csv is supported by the simulated nvidia-smi.' >&2; exit 2 ;; esac
	noheader=0 nounits=0
	case ",$format," in *,noheader,*) noheader=1 ;; esac
	case ",$format," in *,nounits,*) nounits=1 ;; esac
	load 0
	set -f
	oldifs=$IFS
	IFS=,
	if [ "$noheader" -eq 0 ]; then
		line='' sep=''
		for f in $fields; do
			u=''
			field "$f"
			line="$line$sep$h" sep=', '
		done
		echo "$line"
	fi
	k=0
	while [ "$k" -lt "$SKIFF_N" ]; do
		load "$k"
		line='' sep=''
		for f in $fields; do
			u=''
			field "$f"
			[ "$nounits" -eq 1 ] && u=''
			line="$line$sep$v$u" sep=', '
		done
		echo "$line"
		k=$((k + 1))
	done
	IFS=$oldifs
}

if [ "$SKIFF_N" -eq 0 ]; then
	echo 'No devices were found'
	exit 6
fi

query_fields='' query_format=''
while [ $# -gt 0 ]; do
	case "$1" in
	-L|--list-gpus) list; exit 0 ;;
	topo) shift; [ "${1:-}" = -m ] || [ "${1:-}" = --matrix ] || { echo 'usage: nvidia-smi topo -m' >&2; exit 2; }; topo; exit 0 ;;
	--query-gpu=*) query_fields=${1#--query-gpu=} ;;
	--query-gpu) shift; query_fields=${1:-} ;;
	--format=*) query_format=${1#--format=} ;;
	--format) shift; query_format=${1:-} ;;
	-h|--help) banner; echo 'usage: nvidia-smi [-L | topo -m | --query-gpu=FIELDS --format=csv[,noheader][,nounits]]'; exit 0 ;;
	*) echo "Invalid combination of input arguments: $1 (simulated nvidia-smi; see nvidia-smi -h)" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$query_fields" ]; then
	[ -n "$query_format" ] || { echo 'Please specify --format=csv with --query-gpu.' >&2; exit 2; }
	query "$query_fields" "$query_format"
	exit 0
fi
table
`
