package ownership

// Lapse and loss of the node lease (DESIGN.md section 4).

// checkLapse ends every hold once the lease is no longer valid: sockets close
// with 1012, live holds and parked records join the pending releases.
func (c *Core) checkLapse() {
	if c.phase != phaseRunning || c.lease.lapsed || c.now.Before(c.lease.validUntil) {
		return
	}
	c.lease.lapsed = true
	c.count(MetricLeaseLapses, "")
	c.emit(LeaseChanged{Valid: false, State: "lapsed"})
	c.emit(Report{Level: "warn", Msg: "node lease lapsed: no renewal acknowledged for ttl minus safety; closing sockets, releasing holds"})
	c.emit(CloseSockets{All: true, Code: CloseServiceRestart, Reason: "lapse"})
	for _, e := range c.sortedEntries() {
		c.refuseWaiters(e, "node lease lapsed", false)
		c.endLive(e, "lapse")
		c.releaseParked(e, "lapse")
		c.advance(e)
	}
}

// loseLease drops everything without writing: the fence, or the other
// instance, frees the records.
func (c *Core) loseLease(reason string) {
	c.emit(Report{Level: "warn", Msg: "node lease lost: " + reason})
	c.emit(CloseSockets{All: true, Code: CloseServiceRestart, Reason: "lost lease"})
	for _, e := range c.sortedEntries() {
		c.refuseWaiters(e, "node lease lost", false)
		if e.live != nil {
			c.emit(StopActing{Actor: e.actor, Gen: e.live.gen, Reason: "lost lease"})
		}
	}
	c.entries = map[Actor]*entry{}
	c.setParked(0)
	c.exit(false, "lost lease: "+reason)
}
