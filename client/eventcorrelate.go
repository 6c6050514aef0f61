package client

import (
	"hash/maphash"
	"sync"
	"time"
)

// # Correlation: similar events combined, spam dropped
//
// Kubernetes' controllers and kubelet record events through client-go's
// EventCorrelator (tools/record/events_cache.go), and a Recorder made by
// NewRecorder does the same before it deduplicates (events.go):
//
//   - Aggregation. Events about one object with the same source, type and
//     reason but different messages are similar. Once ten different
//     messages came within ten minutes of each other, each further one is
//     recorded as one combined event instead, its message
//     "(combined from similar events): " and the latest message, its count
//     the number of them: a ReplicaSet scaled to 100 shows nine
//     "Created pod: NAME" events and one combined event, as on a real
//     cluster.
//   - The spam filter. A source may record 25 events about one object (of
//     one type) at once; then one more every five minutes (a token bucket
//     per source and object). The others are dropped.
//
// Both remember at most correlateCacheSize keys, as client-go's LRUs. A
// dropped event is not counted in the Event it repeats (client-go counts
// it in its cache, and the next write shows it).
//
// kube-scheduler records through the events.k8s.io library, which does
// neither: the scheduler's recorder is made WithoutCorrelation.

const (
	// aggregateMaxEvents is how many different messages of similar events
	// are recorded as they are before they are combined.
	aggregateMaxEvents = 10
	// aggregateInterval: similar events further apart start afresh.
	aggregateInterval = 600 * time.Second
	// spamBurst events about one object may be recorded at once ...
	spamBurst = 25
	// ... and one more each spamRefill.
	spamRefill = 300 * time.Second
	// correlateCacheSize bounds each of the correlator's two maps; a key
	// pushed out starts afresh, as in client-go's LRUs of 4,096.
	correlateCacheSize = 4096
)

// combinedPrefix begins a combined event's message.
const combinedPrefix = "(combined from similar events): "

// correlator is a Recorder's aggregation and spam filter state.
type correlator struct {
	mu        sync.Mutex
	similar   boundedMap[similarRecord]
	spam      boundedMap[spamBucket]
	seedKey   maphash.Seed
	seedLocal maphash.Seed
}

// similarRecord is what the aggregator knows of one group of similar
// events: the hashes of their different messages (fewer than
// aggregateMaxEvents) and when the last came.
type similarRecord struct {
	messages []uint64
	last     time.Time
}

// spamBucket is a token bucket: tokens at the time at.
type spamBucket struct {
	tokens float64
	at     time.Time
}

func newCorrelator() *correlator {
	return &correlator{
		similar:   newBoundedMap[similarRecord](correlateCacheSize),
		spam:      newBoundedMap[spamBucket](correlateCacheSize),
		seedKey:   maphash.MakeSeed(),
		seedLocal: maphash.MakeSeed(),
	}
}

// correlate decides what becomes of req from source (component, host):
// recorded as it is, recorded as the combined event of its similar ones
// (req.message and req.combined set), or dropped (false).
func (c *correlator) correlate(component, host string, req *eventRequest) bool {
	key := c.hash(component, host, req, true)
	local := maphash.String(c.seedLocal, req.message)
	spamKey := c.hash(component, host, req, false)

	c.mu.Lock()
	defer c.mu.Unlock()
	rec, _ := c.similar.get(key)
	if req.at.Sub(rec.last) > aggregateInterval {
		rec = similarRecord{}
	}
	seen := false
	for _, m := range rec.messages {
		seen = seen || m == local
	}
	if !seen {
		rec.messages = append(rec.messages, local)
	}
	rec.last = req.at
	if len(rec.messages) >= aggregateMaxEvents {
		// Keep fewer than the limit (client-go pops one), so that every
		// new message from now on is combined.
		rec.messages = rec.messages[1:]
		req.message = combinedPrefix + req.message
		req.combined = true
	}
	c.similar.put(key, rec)

	b, ok := c.spam.get(spamKey)
	if !ok {
		b = spamBucket{tokens: spamBurst, at: req.at}
	}
	if elapsed := req.at.Sub(b.at); elapsed > 0 {
		b.tokens = min(spamBurst, b.tokens+elapsed.Seconds()/spamRefill.Seconds())
		b.at = req.at
	}
	allow := b.tokens >= 1
	if allow {
		b.tokens--
	}
	c.spam.put(spamKey, b)
	return allow
}

// hash is the key of req's group of similar events (similar: source,
// involved object, type and reason, as client-go's
// EventAggregatorByReasonFunc) or of its spam bucket (source, involved
// object and type, as its getSpamKey).
func (c *correlator) hash(component, host string, req *eventRequest, similar bool) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seedKey)
	for _, f := range [...]string{component, host, req.ref.Kind, req.ref.Namespace, req.ref.Name,
		req.ref.UID, req.ref.APIVersion, req.eventType} {
		h.WriteString(f)
		h.WriteByte(0)
	}
	if similar {
		h.WriteString(req.reason)
		h.WriteByte(1)
	}
	return h.Sum64()
}

// boundedMap holds at most about size keys: two generations, the older
// dropped when the newer fills; a key read from the older moves to the
// newer. It approximates an LRU of size to size*2 keys.
type boundedMap[V any] struct {
	size      int
	cur, prev map[uint64]V
}

func newBoundedMap[V any](size int) boundedMap[V] {
	return boundedMap[V]{size: size, cur: map[uint64]V{}}
}

func (m *boundedMap[V]) get(k uint64) (V, bool) {
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.prev[k]
	if ok {
		delete(m.prev, k)
		m.put(k, v)
	}
	return v, ok
}

func (m *boundedMap[V]) put(k uint64, v V) {
	if _, ok := m.cur[k]; !ok && len(m.cur) >= m.size {
		m.prev, m.cur = m.cur, make(map[uint64]V, m.size)
	}
	m.cur[k] = v
}
