package renderproc

import (
	"container/list"
	"sync"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// compiledCacheBytes bounds the template texts the compile cache keeps.
// Each config the server holds keeps its own renderer anyway; the cache
// saves the compile of a config seen again (its webhook, then its
// reconciler; a reconcile that changed nothing in its templates).
const compiledCacheBytes = 16 << 20

// compiledCache is Compile's outcomes by templates hash, least recently
// used first out: a renderer, or the templates' own compile error (which
// a later compile would only repeat).
type compiledCache struct {
	mu      sync.Mutex
	entries map[string]*list.Element
	order   list.List // of *compiledEntry, most recent at the front
	bytes   int64
}

type compiledEntry struct {
	hash     string
	renderer render.Renderer
	err      error
	size     int64
}

func (c *compiledCache) get(hash string) (render.Renderer, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok {
		return nil, nil, false
	}
	c.order.MoveToFront(e)
	entry := e.Value.(*compiledEntry)
	return entry.renderer, entry.err, true
}

// put keeps an outcome of size bytes; one larger than the whole bound is
// not kept.
func (c *compiledCache) put(hash string, r render.Renderer, err error, size int64) {
	if size > compiledCacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]*list.Element)
	}
	if e, ok := c.entries[hash]; ok {
		c.bytes -= e.Value.(*compiledEntry).size
		c.order.Remove(e)
	}
	c.entries[hash] = c.order.PushFront(&compiledEntry{hash: hash, renderer: r, err: err, size: size})
	c.bytes += size
	for c.bytes > compiledCacheBytes {
		oldest := c.order.Back()
		entry := oldest.Value.(*compiledEntry)
		c.order.Remove(oldest)
		delete(c.entries, entry.hash)
		c.bytes -= entry.size
	}
}

// size is about what the templates hold in memory.
func (w *wireTemplates) size() int64 {
	n := int64(len(w.HAProxyConfig) + len(w.Learned))
	for _, files := range [][]wireFile{w.Snippets, w.Maps, w.Files, w.SSLCertificates} {
		for _, f := range files {
			n += int64(len(f.Name) + len(f.Text))
		}
	}
	return n
}
