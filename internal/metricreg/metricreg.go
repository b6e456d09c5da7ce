// Package metricreg holds what every package that exports Prometheus metrics
// needs alike.
package metricreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on r and returns it, or returns the collector r
// already has under the same description (so that two components of one
// node can share a registry and a metric). A nil r registers nothing.
func Register[C prometheus.Collector](r prometheus.Registerer, c C) (C, error) {
	if r == nil {
		return c, nil
	}
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
