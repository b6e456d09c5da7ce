package kvrun

import (
	"sync"
	"unsafe"
)

// Cache keeps decoded blocks, indexes and filters of runs for the whole
// node, least recently used first out, within a bound in bytes. What it
// is charged for an item is the memory the item keeps: the bytes fetched,
// what decoding made, and the Cache's own bookkeeping. A Cache is safe for
// use from several goroutines; a nil *Cache keeps nothing.
//
// Two Readers that miss the same block at once both fetch it; the first
// to add it is kept.
type Cache struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	items map[cacheKey]*cacheItem
	lru   cacheItem // sentinel: lru.next is the most recently used
	stats CacheStats
}

// CacheStats counts a Cache's work since it was made.
type CacheStats struct {
	Hits, Misses int64
	Evictions    int64 // items dropped to make room
	Bytes        int64 // charged for the items kept now
	Items        int
}

// cacheKey names a block, or an index with its filter, by the offset it
// starts at in its run.
type cacheKey struct {
	run string
	off int64
}

type cacheItem struct {
	key        cacheKey
	val        any // *block or *index
	size       int64
	prev, next *cacheItem
}

// itemOverhead is the Cache's own memory for one item: the item and its
// slot in the map (the run id's bytes are the Reader's).
const itemOverhead = int64(unsafe.Sizeof(cacheItem{})) + 64

// NewCache returns a Cache that keeps at most maxBytes.
func NewCache(maxBytes int64) *Cache {
	c := &Cache{max: maxBytes, items: map[cacheKey]*cacheItem{}}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// Stats returns the Cache's counts.
func (c *Cache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Items = c.bytes, len(c.items)
	return s
}

// get returns the item under k, or nil.
func (c *Cache) get(k cacheKey) any {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	it := c.items[k]
	if it == nil {
		c.stats.Misses++
		return nil
	}
	c.stats.Hits++
	c.unlink(it)
	c.pushFront(it)
	return it.val
}

// add keeps v under k, charged size bytes and the item's overhead, and
// drops the least recently used items past the bound. An item larger than
// the bound is not kept.
func (c *Cache) add(k cacheKey, v any, size int64) {
	if c == nil {
		return
	}
	size += itemOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.max || c.items[k] != nil {
		return
	}
	it := &cacheItem{key: k, val: v, size: size}
	c.items[k] = it
	c.pushFront(it)
	c.bytes += size
	for c.bytes > c.max {
		old := c.lru.prev
		c.unlink(old)
		delete(c.items, old.key)
		c.bytes -= old.size
		c.stats.Evictions++
	}
}

func (c *Cache) unlink(it *cacheItem) {
	it.prev.next, it.next.prev = it.next, it.prev
	it.prev, it.next = nil, nil
}

func (c *Cache) pushFront(it *cacheItem) {
	it.prev, it.next = &c.lru, c.lru.next
	c.lru.next.prev = it
	c.lru.next = it
}
