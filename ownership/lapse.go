package ownership

// Lapse and loss of the node lease (docs/PROTOCOL.md §2).

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
	c.dropAll("lost lease", "node lease lost")
	c.exit(false, "lost lease: "+reason)
}

// dropAll ends every hold and parked record without writing, before an
// exit that is not clean: sockets close, waiters are refused with refusal,
// live holds stop acting for reason, and the entries are forgotten.
func (c *Core) dropAll(reason, refusal string) {
	c.emit(CloseSockets{All: true, Code: CloseServiceRestart, Reason: reason})
	for _, e := range c.sortedEntries() {
		c.refuseWaiters(e, refusal, false)
		if e.live != nil {
			c.emit(StopActing{Actor: e.actor, Gen: e.live.gen, Reason: reason})
		}
	}
	c.entries = map[Actor]*entry{}
	c.setParked(0)
}
