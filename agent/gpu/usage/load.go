package usage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"skiff.dev/skiff/agent/gpu"
)

// The load protocol between a container's gpu-load (a sh script, see
// agent/gpu/nvidiasmi) and the node. Each memory domain (a GPU, or a MIG
// device) has a directory, ROOT/DOMAIN, that the simulated driver's CDI
// spec mounts read-write into every container given a device of that
// domain, at /run/skiff-gpu/load/DOMAIN (as a real driver's /dev nodes are
// mounted). A running load is two files there:
//
//	TOKEN.fifo  a named pipe the load keeps open for as long as it lives;
//	TOKEN.load  its record, written after the fifo is open:
//	            DEVICE=<device ID>  UTIL=<0..100>  MEM=<MiB>  SM=<0..100>
//
// A load is alive while some process holds its fifo open: opening the fifo
// for writing without blocking fails (ENXIO) once no process has it open
// for reading. So a load whose process was killed -9, or whose container
// was, is dead at once, with nothing to clean up on its side; Sweep (the
// agent's, and every Sample) removes its files. A load that ends normally
// removes them itself. The node never writes a container's records and
// never follows a link in these directories: a container holding one
// writes into it, so what is read is bounded and checked.
const (
	// LoadSuffix and FifoSuffix end the two files of a load.
	LoadSuffix = ".load"
	FifoSuffix = ".fifo"
	// LockName is the lock directory (mkdir is atomic) that gpu-load and
	// Hold take while they check and record an allocation, so two loads
	// starting at once cannot both take the last free memory.
	LockName = ".lock"
	// maxRecord bounds a record's size, maxLoads the loads read per domain.
	maxRecord = 512
	maxLoads  = 256
	// lockStale: a lock older than this was left by a killed allocator.
	lockStale = 5 * time.Second
)

// Load is one running simulated CUDA workload on one device.
type Load struct {
	// Token names the load's files (TOKEN.load, TOKEN.fifo).
	Token string `json:"token"`
	// Device is the ID of the device it runs on (gpu.SubDevice.ID).
	Device string `json:"device"`
	// UtilPercent is the share of the domain's SMs it asks for.
	UtilPercent int `json:"utilPercent"`
	// MemoryMiB it holds.
	MemoryMiB uint64 `json:"memoryMiB"`
	// SMPercent is the cap its device puts on it (100, or MPS's share).
	SMPercent int `json:"smPercent"`
}

// DomainDir is the directory of a memory domain's loads under root.
func DomainDir(root, domain string) string { return filepath.Join(root, domain) }

// ValidDomain reports whether a domain ID is safe as one path element
// (GPU and MIG UUIDs are).
func ValidDomain(domain string) bool {
	if domain == "" || domain == "." || domain == ".." || len(domain) > 128 {
		return false
	}
	for _, c := range domain {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// PrepareDirs makes the directory of every domain of the layout under
// root, writable by any user of a container (mode 1777, like /tmp: a
// container need not run as root to start a load).
func PrepareDirs(root string, layout []gpu.SubDevice) error {
	for _, d := range layout {
		if !ValidDomain(d.Domain) {
			return fmt.Errorf("GPU load directory: domain %q is not a valid name", d.Domain)
		}
		dir := DomainDir(root, d.Domain)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("GPU load directory: %w", err)
		}
		if err := os.Chmod(dir, 0o1777|fs.ModeSticky); err != nil {
			return fmt.Errorf("GPU load directory: %w", err)
		}
	}
	return nil
}

// ParseLoad reads a record strictly: the four keys, each once, numbers in
// range. Anything else is an error (the record is ignored and removed).
func ParseLoad(token string, data []byte) (Load, error) {
	l := Load{Token: token}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || seen[k] {
			return Load{}, fmt.Errorf("load %s: bad line %q", token, line)
		}
		seen[k] = true
		var err error
		switch k {
		case "DEVICE":
			if v == "" || len(v) > 200 {
				err = errors.New("bad device")
			}
			l.Device = v
		case "UTIL":
			l.UtilPercent, err = percent(v)
		case "SM":
			l.SMPercent, err = percent(v)
		case "MEM":
			l.MemoryMiB, err = strconv.ParseUint(v, 10, 32)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return Load{}, fmt.Errorf("load %s: %s: %v", token, k, err)
		}
	}
	if len(seen) != 4 {
		return Load{}, fmt.Errorf("load %s: want DEVICE, UTIL, MEM and SM", token)
	}
	return l, nil
}

func percent(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 100 {
		return 0, fmt.Errorf("%q is not a percentage", v)
	}
	return n, nil
}

// FormatLoad is the record of l (what gpu-load writes).
func FormatLoad(l Load) []byte {
	return fmt.Appendf(nil, "DEVICE=%s\nUTIL=%d\nMEM=%d\nSM=%d\n", l.Device, l.UtilPercent, l.MemoryMiB, l.SMPercent)
}

// alive reports whether a process holds the fifo open (see the protocol).
func alive(fifo string) bool {
	st, err := os.Lstat(fifo)
	if err != nil || st.Mode().Type() != fs.ModeNamedPipe {
		return false
	}
	fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false // ENXIO: no reader, the load is dead
	}
	syscall.Close(fd)
	return true
}

// ReadDomain returns the live loads of a domain directory, sorted by token,
// and removes the files of dead or damaged ones. A missing directory has
// no loads.
func ReadDomain(dir string) ([]Load, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read GPU loads: %w", err)
	}
	var out []Load
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // temporaries and the lock
		}
		token, ok := strings.CutSuffix(name, LoadSuffix)
		if !ok {
			if t, isFifo := strings.CutSuffix(name, FifoSuffix); isFifo {
				sweepFifo(dir, t)
			}
			continue
		}
		if len(out) >= maxLoads {
			break
		}
		if !alive(filepath.Join(dir, token+FifoSuffix)) {
			removeLoad(dir, token)
			continue
		}
		data, err := readRecord(filepath.Join(dir, name))
		if err != nil {
			removeLoad(dir, token)
			continue
		}
		l, err := ParseLoad(token, data)
		if err != nil {
			removeLoad(dir, token)
			continue
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Load) int { return strings.Compare(a.Token, b.Token) })
	return out, nil
}

// sweepFifo removes the fifo of a load that never wrote its record (it
// was killed while it started), once it is older than lockStale: a
// younger one may belong to a gpu-load between its mkfifo and its open.
func sweepFifo(dir, token string) {
	fifo := filepath.Join(dir, token+FifoSuffix)
	st, err := os.Lstat(fifo)
	if err != nil || time.Since(st.ModTime()) < lockStale || alive(fifo) {
		return
	}
	if _, err := os.Lstat(filepath.Join(dir, token+LoadSuffix)); errors.Is(err, fs.ErrNotExist) {
		os.Remove(fifo)
	}
}

// readRecord reads a regular file without following a link, at most maxRecord bytes.
func readRecord(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, maxRecord))
}

func removeLoad(dir, token string) {
	os.Remove(filepath.Join(dir, token+LoadSuffix))
	os.Remove(filepath.Join(dir, token+FifoSuffix))
}

// ErrOutOfMemory is CUDA's answer to an allocation that does not fit:
// cudaErrorMemoryAllocation, "out of memory".
var ErrOutOfMemory = errors.New("CUDA error: out of memory")

// Held is a load started from Go (Hold): what gpu-load does in a
// container, for a node whose pods run on the simulated runtime, and for
// tests. Release ends it.
type Held struct {
	dir, token string
	fifo       *os.File
}

// Hold starts a load of util percent and mem MiB on device d under root,
// with the checks gpu-load makes: mem within the device's MemoryMiB and
// within what the domain has free. A load that does not fit returns an
// error wrapping ErrOutOfMemory and starts nothing.
func Hold(root string, d gpu.SubDevice, util int, mem uint64) (*Held, error) {
	if util < 0 || util > 100 {
		return nil, fmt.Errorf("util %d is not a percentage", util)
	}
	dir := DomainDir(root, d.Domain)
	unlock, err := lockDomain(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if mem > d.MemoryMiB {
		return nil, fmt.Errorf("%w: %d MiB asked, the device allows %d MiB", ErrOutOfMemory, mem, d.MemoryMiB)
	}
	loads, err := ReadDomain(dir)
	if err != nil {
		return nil, err
	}
	var used uint64
	for _, l := range loads {
		used += l.MemoryMiB
	}
	if used+mem > d.DomainMiB {
		return nil, fmt.Errorf("%w: %d MiB asked, %d MiB free of %d MiB", ErrOutOfMemory, mem, d.DomainMiB-min(used, d.DomainMiB), d.DomainMiB)
	}
	token := fmt.Sprintf("go-%d-%d", os.Getpid(), time.Now().UnixNano())
	fifoPath := filepath.Join(dir, token+FifoSuffix)
	if err := syscall.Mkfifo(fifoPath, 0o600); err != nil {
		return nil, fmt.Errorf("start GPU load: %w", err)
	}
	f, err := os.OpenFile(fifoPath, os.O_RDWR, 0) // RDWR: opening does not wait for a writer
	if err != nil {
		os.Remove(fifoPath)
		return nil, fmt.Errorf("start GPU load: %w", err)
	}
	rec := FormatLoad(Load{Device: d.ID, UtilPercent: util, MemoryMiB: mem, SMPercent: d.SMPercent})
	tmp := filepath.Join(dir, "."+token)
	if err = os.WriteFile(tmp, rec, 0o644); err == nil {
		err = os.Rename(tmp, filepath.Join(dir, token+LoadSuffix))
	}
	if err != nil {
		f.Close()
		removeLoad(dir, token)
		return nil, fmt.Errorf("start GPU load: %w", err)
	}
	return &Held{dir: dir, token: token, fifo: f}, nil
}

// Release ends the load. Safe to call twice.
func (h *Held) Release() {
	if h == nil || h.fifo == nil {
		return
	}
	h.fifo.Close()
	h.fifo = nil
	removeLoad(h.dir, h.token)
}

// Kill ends the load as kill -9 would: its fifo closes, its files stay
// until a sweep.
func (h *Held) Kill() {
	if h == nil || h.fifo == nil {
		return
	}
	h.fifo.Close()
	h.fifo = nil
}

// lockDomain takes the domain's allocation lock (the directory LockName,
// as gpu-load takes it), breaking one older than lockStale.
func lockDomain(dir string) (func(), error) {
	lock := filepath.Join(dir, LockName)
	deadline := time.Now().Add(2 * lockStale)
	for {
		err := os.Mkdir(lock, 0o700)
		if err == nil {
			return func() { os.Remove(lock) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock GPU loads: %w", err)
		}
		if st, err := os.Lstat(lock); err == nil && time.Since(st.ModTime()) > lockStale {
			os.Remove(lock)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock GPU loads: %s is held", lock)
		}
		time.Sleep(10 * time.Millisecond) // a lock is held for milliseconds; mkdir cannot be waited on
	}
}
