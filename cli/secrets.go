package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/wasmkeep/wasmkeep/internal/secrets"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// identityEnv names the environment variable a secrets identity may be
// given in (the text of an age identity file) instead of a file.
const identityEnv = "WASMKEEP_SECRETS_IDENTITY"

func secretsCommands() *command {
	return &command{
		name:    "secrets",
		summary: "keep the application's secrets in the bucket, sealed to the cluster's recipients",
		detail: "A secret is sealed with age (filippo.io/age) to the cluster's recipients (secrets/recipients in\n" +
			"the bucket) and kept as secrets/v/NAME: nothing in the bucket reads it. A node opens the secrets\n" +
			"with its identity (serve --secrets-identity FILE, or " + identityEnv + "), never stored in the\n" +
			"bucket, and its classes and front read them (actors.Secret); a node that cannot open them\n" +
			"drains. Rotation: 'recipients add' the new one, give the nodes its identity, then 'recipients\n" +
			"remove' the old one: no node is unable to open them in between.",
		subs: []*command{
			{name: "keygen", summary: "print a new identity (keep it secret) and its recipient", setup: setupSecretsKeygen},
			{name: "set", args: "NAME", summary: "seal the value on standard input as the secret NAME",
				detail: "Reads the value from standard input (at most 64 KiB, as given: a trailing newline is kept),\n" +
					"seals it to the cluster's recipients and writes it. Needs no identity. The nodes read it\n" +
					"within their secrets poll (30 s).", setup: setupSecretsLeaf(runSecretsSet)},
			{name: "list", summary: "list the secrets' names (never their values)", setup: setupSecretsLeaf(runSecretsList)},
			{name: "delete", args: "NAME", summary: "delete the secret NAME", setup: setupSecretsLeaf(runSecretsDelete)},
			{
				name:    "recipients",
				summary: "list, add or remove the cluster's recipients",
				subs: []*command{
					{name: "list", summary: "list the recipients", setup: setupSecretsLeaf(runRecipientsList)},
					{name: "add", args: "RECIPIENT", summary: "add a recipient and seal every secret to it too (needs --identity)",
						setup: setupSecretsLeaf(runRecipientsChange(true))},
					{name: "remove", args: "RECIPIENT", summary: "remove a recipient and seal every secret without it (needs --identity)",
						setup: setupSecretsLeaf(runRecipientsChange(false))},
				},
			},
		},
	}
}

// secretsConfig is what the secrets commands run with.
type secretsConfig struct {
	BucketURL string
	Identity  string
	Timeout   time.Duration
}

func setupSecretsLeaf(run func(ctx context.Context, cfg secretsConfig, e env, b ownership.Bucket, args []string) error) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		cfg := secretsConfig{BucketURL: defaultBucketURL, Timeout: time.Minute}
		fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
		fs.StringVar(&cfg.Identity, "identity", "", "age identity file that opens the secrets (or "+identityEnv+"): needed to seal them again to other recipients")
		fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the reads and writes")
		return func(ctx context.Context, e env, args []string) error {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error { return run(ctx, cfg, e, b, args) })
		}
	}
}

func oneName(args []string) (string, error) {
	if len(args) != 1 {
		return "", usageError{fmt.Errorf("want one NAME, got %d arguments", len(args))}
	}
	if err := secrets.CheckName(args[0]); err != nil {
		return "", usageError{err}
	}
	return args[0], nil
}

func runSecretsSet(ctx context.Context, _ secretsConfig, e env, b ownership.Bucket, args []string) error {
	name, err := oneName(args)
	if err != nil {
		return err
	}
	value, err := io.ReadAll(io.LimitReader(e.in, secrets.MaxValue+1))
	if err != nil {
		return fmt.Errorf("read the value: %w", err)
	}
	if err := secrets.Set(ctx, b, name, value); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "secret %s sealed (%d bytes) to the cluster's recipients.\n", name, len(value))
	return nil
}

func runSecretsList(ctx context.Context, _ secretsConfig, e env, b ownership.Bucket, args []string) error {
	if len(args) != 0 {
		return usageError{errors.New("list takes no argument")}
	}
	list, err := secrets.List(ctx, b)
	if err != nil {
		return err
	}
	for _, s := range list {
		fmt.Fprintln(e.out, s.Name)
	}
	return nil
}

func runSecretsDelete(ctx context.Context, _ secretsConfig, e env, b ownership.Bucket, args []string) error {
	name, err := oneName(args)
	if err != nil {
		return err
	}
	if err := secrets.Delete(ctx, b, name); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "secret %s deleted.\n", name)
	return nil
}

func runRecipientsList(ctx context.Context, _ secretsConfig, e env, b ownership.Bucket, args []string) error {
	if len(args) != 0 {
		return usageError{errors.New("list takes no argument")}
	}
	rs, _, err := secrets.Recipients(ctx, b)
	if err != nil {
		return err
	}
	for _, r := range rs {
		fmt.Fprintln(e.out, r)
	}
	return nil
}

func runRecipientsChange(add bool) func(ctx context.Context, cfg secretsConfig, e env, b ownership.Bucket, args []string) error {
	return func(ctx context.Context, cfg secretsConfig, e env, b ownership.Bucket, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("want one RECIPIENT, got %d arguments", len(args))}
		}
		r := args[0]
		if _, err := age.ParseRecipients(stringsReader(r)); err != nil {
			return usageError{fmt.Errorf("recipient %q: %w", r, err)}
		}
		ids, err := secrets.ReadIdentities(cfg.Identity, os.Getenv(identityEnv))
		if err != nil {
			return err
		}
		rs, _, err := secrets.Recipients(ctx, b)
		if err != nil {
			return err
		}
		switch i := slices.Index(rs, r); {
		case add && i >= 0:
			return fmt.Errorf("recipient %s is one already", r)
		case add:
			rs = append(rs, r)
		case i < 0:
			return fmt.Errorf("recipient %s is not one of the cluster's", r)
		case len(rs) == 1:
			return errors.New("refusing to remove the last recipient: no node could open the secrets")
		default:
			rs = slices.Delete(rs, i, i+1)
		}
		if err := secrets.SetRecipients(ctx, b, rs, ids); err != nil {
			if errors.Is(err, secrets.ErrCannotOpen) {
				return fmt.Errorf("%w: give --identity (or %s) an identity of one of the recipients", err, identityEnv)
			}
			return err
		}
		verb := "added"
		if !add {
			verb = "removed"
		}
		plural := "s"
		if len(rs) == 1 {
			plural = ""
		}
		fmt.Fprintf(e.out, "recipient %s %s; every secret sealed again to the cluster's %d recipient%s.\n", r, verb, len(rs), plural)
		return nil
	}
}

func setupSecretsKeygen(fs *flag.FlagSet) action {
	return func(_ context.Context, e env, args []string) error {
		if len(args) != 0 {
			return usageError{errors.New("keygen takes no argument")}
		}
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "# recipient: %s\n%s\n", id.Recipient(), id)
		return nil
	}
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
