package sim

import (
	"fmt"
	"sort"
	"strings"
)

func (s *Stats) add(o Stats) {
	s.Events += o.Events
	s.Served += o.Served
	s.GivenUp += o.GivenUp
	s.Acquisitions += o.Acquisitions
	s.Parks += o.Parks
	s.WakesAtHome += o.WakesAtHome
	s.Relays += o.Relays
	s.Exposed += o.Exposed
	s.Crashes += o.Crashes
	s.Stops += o.Stops
	s.Drains += o.Drains
	s.Moves += o.Moves
	s.Cuts += o.Cuts
	s.Blackouts += o.Blackouts
	s.Requests += o.Requests
	s.Faults += o.Faults
	s.SimEvents += o.SimEvents
	s.Commits += o.Commits
	s.StaleRefused += o.StaleRefused
	s.Runs += o.Runs
	s.LateReleases += o.LateReleases
	s.Refusals += o.Refusals
	s.Unknowns += o.Unknowns
	s.Resolved += o.Resolved
	s.Fenced += o.Fenced
	s.AlarmDeliveries += o.AlarmDeliveries
	s.AlarmEnded += o.AlarmEnded
	s.AlarmsFired += o.AlarmsFired
	if s.Releases == nil {
		s.Releases = map[string]int{}
	}
	for k, v := range o.Releases {
		s.Releases[k] += v
	}
}

func (s Stats) summary() string {
	var rel []string
	for k, v := range s.Releases {
		rel = append(rel, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(rel)
	return fmt.Sprintf("%d events (%d served, %d given up), %d acquisitions, %d parks, %d wakes at home, %d relays, %d exposed takeovers; "+
		"%d crashes, %d clean stops, %d drains, %d moves, %d cut links, %d bucket blackouts; %d bucket requests (%d faulted), %d simulated events; %d commits, %d stale state writes refused, %d runs written; "+
		"%d events refused after they ran, %d with an unknown outcome, %d released after their hold ended, %d commits without an answer found landed and %d fenced; "+
		"%d alarm deliveries (%d ended, their entry deleted), %d alarm firings landed; releases: %s",
		s.Events, s.Served, s.GivenUp, s.Acquisitions, s.Parks, s.WakesAtHome, s.Relays, s.Exposed,
		s.Crashes, s.Stops, s.Drains, s.Moves, s.Cuts, s.Blackouts, s.Requests, s.Faults, s.SimEvents, s.Commits, s.StaleRefused, s.Runs,
		s.Refusals, s.Unknowns, s.LateReleases, s.Resolved, s.Fenced, s.AlarmDeliveries, s.AlarmEnded, s.AlarmsFired, strings.Join(rel, " "))
}
