package keeper

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// Within this package, this file and shell.go are the only places that
// touch proto.actor, so that an upgrade of the library changes little here
// (the resident actors, package internal/actorhost, and their supervision, package
// supervisors, are proto.actor actors too; tests/deps keeps the library
// out of every other package).

// NewSystem makes an actor system that logs through logger (its records
// carry lib=protoactor and the system's id), and exports no metrics of its
// own: nodes count with client_golang, at a tenth of the cost per message
// of the library's OpenTelemetry instruments.
//
// An actor system has no goroutine of its own; it needs no shutdown once
// its actors have stopped.
func NewSystem(logger *slog.Logger) *actor.ActorSystem {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return actor.NewActorSystem(actor.WithLoggerFactory(func(sys *actor.ActorSystem) *slog.Logger {
		return logger.With(slog.String("lib", "protoactor"), slog.String("system", sys.ID))
	}))
}
