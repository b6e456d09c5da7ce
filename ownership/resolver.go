package ownership

// The resolver of unresolved acquisitions (docs/PROTOCOL.md §3): a record
// counts as held here only when a live or parked hold here has that exact
// generation, and an unchanged record stays under watch for a bounded time.

func (c *Core) onResolveRead(e *entry, r Reply) {
	rec, ok, damaged := c.readRecord(e, r)
	if !ok {
		// No answer, or damaged: proves nothing. Read again later; a
		// damaged record ends the entries whose watch ran out.
		for _, u := range e.unresolved {
			u.due = c.now.Add(c.cfg.AttemptTimeout)
		}
		if damaged {
			c.expireUnresolved(e)
		}
		return
	}
	kept := e.unresolved[:0]
	for _, u := range e.unresolved {
		if !c.now.Before(u.due) {
			if done := c.resolve(e, u, rec, r.ETag); done {
				continue
			}
		}
		kept = append(kept, u)
	}
	e.unresolved = kept
}

// resolve decides one unresolved acquisition from a fresh read; it reports
// whether the entry ends.
func (c *Core) resolve(e *entry, u *unresolved, rec *Record, etag ETag) bool {
	unchanged := (rec == nil && u.created) || (rec != nil && etag == u.prior)
	switch {
	case rec != nil && rec.Names(c.cfg.Node, c.cfg.Instance) && rec.Generation == u.gen:
		// Held here only when a live or parked hold has this exact generation.
		if (e.live != nil && e.live.gen == u.gen) || (e.parked != nil && e.parked.gen == u.gen) {
			c.count(MetricResolver, "held")
			return true
		}
		c.count(MetricResolver, "released")
		c.queueRelease(e, hold{gen: u.gen, etag: etag}, "resolver", false, false)
		if e.parked != nil && e.parked.gen < u.gen {
			// A wake that landed unanswered: the parked version is behind.
			c.dropParked(e)
		}
		return true
	case unchanged:
		if c.now.Sub(u.since) < c.cfg.ResolverWatch {
			// The write may still land: keep watching.
			u.due = c.now.Add(c.cfg.AttemptTimeout)
			c.count(MetricResolver, "unchanged")
			return false
		}
		c.count(MetricResolver, "expired")
		return true
	default:
		c.count(MetricResolver, "moved")
		return true
	}
}

func (c *Core) expireUnresolved(e *entry) {
	kept := e.unresolved[:0]
	for _, u := range e.unresolved {
		if c.now.Sub(u.since) >= c.cfg.ResolverWatch {
			c.count(MetricResolver, "expired")
			continue
		}
		kept = append(kept, u)
	}
	e.unresolved = kept
}
