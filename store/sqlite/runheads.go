package sqlite

import (
	"errors"
	"sync"

	"github.com/armature-go/armature/runtime"
)

// maxCachedHeads bounds runHeads: a process has about as many started
// runs as turns in flight, far fewer than this.
const maxCachedHeads = 4096

// errStaleHead: a cached run head no longer matches the run's row.
var errStaleHead = errors.New("sqlite: a cached run head is stale")

// runHeads caches the heads of the started runs this Store wrote last,
// as its writes left them, so that a group commit appending to them (a
// turn's end, after its start was made durable) need not read them
// first. It is only a hint: the UPDATE that ends a batch's writes to a
// run matches the row as cached, and a batch that finds a run changed
// (another Store of the file wrote it) is written again with every head
// read (RunStore.WriteTurns).
type runHeads struct {
	mu sync.Mutex
	m  map[[2]string]runHead
}

// get returns the cached head of the run (tenant, id).
func (c *runHeads) get(k [2]string) (runHead, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[k]
	return h, ok
}

// remember caches the heads a committed batch left its runs with:
// started runs are kept, ended ones dropped.
func (c *runHeads) remember(runs []*batchRun) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, br := range runs {
		if runtime.Status(br.head.status) != runtime.StatusStarted {
			delete(c.m, br.key)
			continue
		}
		if c.m == nil {
			c.m = make(map[[2]string]runHead)
		}
		if _, ok := c.m[br.key]; ok || len(c.m) < maxCachedHeads {
			h := br.head
			h.pos = 0 // not known for runs inserted by the batch; unused
			c.m[br.key] = h
		}
	}
}

// forget drops the heads of the records' runs.
func (c *runHeads) forget(turns []runtime.TurnRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tr := range turns {
		delete(c.m, [2]string{tr.Append.Tenant, tr.Append.RunID})
	}
}

// drop drops the head of the run (tenant, id).
func (c *runHeads) drop(tenant, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, [2]string{tenant, id})
}
