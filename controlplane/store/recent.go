package store

import (
	"sync"

	"github.com/klauspost/compress/s2"

	"skiff.dev/skiff/api"
)

// recentWrites keeps, for the last recentMax keys written, the object as
// committed and its stored JSON: where GuaranteedUpdate starts, instead
// of reading the stored JSON and decoding it (a pod's decode is about
// seven times its copy). It is kube-apiserver's answer too: its
// GuaranteedUpdate starts from the watch cache's object.
//
// An entry is the writer's copy the live watchers share (op.live, never
// changed) and its JSON, S2-compressed as the watch history keeps it when
// that is smaller. The committer puts each committed create and update in
// and takes each delete out, before the writer hears of the commit, so an
// entry is the stored object unless a commit is on its way. A start from
// an entry is a guess GuaranteedUpdate checks: it writes with the entry's
// resourceVersion as its precondition, so a stale entry fails as a
// conflict and the next try reads the store; an update that changes
// nothing is confirmed against the store before it is reported as one.
type recentWrites struct {
	mu      sync.Mutex
	entries map[string]recentEntry // bucket + "/" + key
	// order holds the keys in the order they were put in, the oldest at
	// order[head]: when full, the oldest key's entry goes first.
	order   []recentKey
	head, n int
}

type recentEntry struct {
	rev int64
	obj api.Object // the object as committed at rev; never changed
	raw []byte     // its JSON; nil when z is set
	z   []byte     // its JSON, S2-compressed
}

type recentKey struct {
	key string
	rev int64
}

// recentMax bounds the entries: a few MB of compressed JSON at most, and
// objects the informers hold anyway (only an object's last version is
// kept). A scheduler binds a pod a few thousand writes after its create
// at worst in the 10,000-pod benchmark.
const recentMax = 4096

func recentKeyOf(bucket, key string) string { return bucket + "/" + key }

// put notes the committed events of one batch (the committer's).
func (r *recentWrites) put(events []hubEvent, keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = make(map[string]recentEntry)
		r.order = make([]recentKey, recentMax)
	}
	for i := range events {
		e := &events[i]
		k := keys[i]
		if e.typ == api.Deleted || e.obj == nil {
			delete(r.entries, k)
			continue
		}
		ent := recentEntry{rev: e.rev, obj: e.obj, raw: e.raw, z: e.z}
		if ent.z != nil {
			ent.raw = nil
		}
		r.entries[k] = ent
		if r.n == len(r.order) {
			old := r.order[r.head]
			if cur, ok := r.entries[old.key]; ok && cur.rev == old.rev {
				delete(r.entries, old.key)
			}
			r.head = (r.head + 1) % len(r.order)
			r.n--
		}
		r.order[(r.head+r.n)%len(r.order)] = recentKey{k, e.rev}
		r.n++
	}
}

// get returns a private copy of key's last committed object and its JSON.
func (r *recentWrites) get(key string) (api.Object, []byte, bool) {
	r.mu.Lock()
	e, ok := r.entries[key]
	r.mu.Unlock()
	if !ok {
		return nil, nil, false
	}
	raw := e.raw
	if raw == nil {
		var err error
		if raw, err = s2.Decode(nil, e.z); err != nil {
			return nil, nil, false // read the store instead
		}
	}
	return api.Clone(e.obj), raw, true
}
