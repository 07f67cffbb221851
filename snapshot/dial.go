package snapshot

import (
	"context"
	"fmt"

	vkit "cloud.google.com/go/firestore/apiv1"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// emulatorHostEnv names the Firestore emulator, as the Firestore client
// reads it.
const emulatorHostEnv = "FIRESTORE_EMULATOR_HOST"

// DialAPI opens the Firestore API client a Writer's chunks run on (see
// WithAPIClient) as firestore.NewClient finds Firestore: on the emulator
// at emulatorHost (host:port, as FIRESTORE_EMULATOR_HOST names it) when
// it is not empty, else on Firestore itself with opts (by default,
// Application Default Credentials).
func DialAPI(ctx context.Context, emulatorHost string, opts ...option.ClientOption) (*vkit.Client, error) {
	if emulatorHost == "" {
		return vkit.NewClient(ctx, opts...)
	}
	conn, err := DialEmulator(emulatorHost)
	if err != nil {
		return nil, err
	}
	return vkit.NewClient(ctx, option.WithGRPCConn(conn))
}

// DialEmulator opens a connection to the Firestore emulator at host, as
// the Firestore client does: in plain text, with the emulator's owner
// credential, and with OpenTelemetry's gRPC instrumentation, as the
// transport the Firestore client dials the emulator (and Firestore) with
// has. A client of any Firestore API — the data API's (DialAPI), the
// Admin API's — runs on it through option.WithGRPCConn.
func DialEmulator(host string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulatorOwner{}),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
	if err != nil {
		return nil, fmt.Errorf("dialing the emulator at %s: %w", host, err)
	}
	return conn, nil
}

// emulatorOwner is the emulator's admin credential, as the Firestore
// client sends it: it bypasses security rules.
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (emulatorOwner) RequireTransportSecurity() bool { return false }
