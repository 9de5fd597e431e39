package devguardwire

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var (
	secretA = strings.Repeat("a1", 32)
	digestB = strings.Repeat("0b", 32)
)

// frameOf wraps body in an envelope of version 1 and request id 5.
func frameOf(body string) string {
	return `{"version":1,"request_id":5,"body":` + body + `}`
}

const keyJSON = `{"consumer_id":"codespace","consumer_generation":"g1","attempt_id":"a-1"}`

var key1 = Key{ConsumerID: "codespace", ConsumerGeneration: "g1", AttemptID: "a-1"}

const admissionJSON = `{"key":` + keyJSON + `,"execution_digest":"` + "DIGEST" + `","intent":{"profile":"interactive",` +
	`"requested":{"cpu_milli":100,"memory_bytes":67108864,"tasks":8},"minimum":{"cpu":"accounted","memory":"cooperative","pids":"kernel"}}}`

func TestDecodeEveryRequest(t *testing.T) {
	admissionText := strings.Replace(admissionJSON, "DIGEST", digestB, 1)
	admission := Admission{Key: key1, ExecutionDigest: digestB, Intent: Intent{
		Profile:   "interactive",
		Requested: Budget{CPUMilli: 100, MemoryBytes: 64 << 20, Tasks: 8},
		Minimum:   Levels{CPU: LevelAccounted, Memory: LevelCooperative, PIDs: LevelKernel},
	}}
	secret, _ := NewSecret(secretA)
	ttl := uint64(1500)
	tests := []struct {
		name string
		body string
		want Request
	}{
		{"hello", `{"method":"hello","params":{"compatibility":{"minimum_protocol":1,"maximum_protocol":1,"required":["static_control_reservations","durable_admission","durable_admission"]}}}`,
			Request{Method: MethodHello, Compatibility: Compatibility{1, 1, []Capability{CapDurableAdmission, CapStaticControlReservations}}}},
		{"authenticate_consumer", `{"method":"authenticate","params":{"credential":{"kind":"consumer","consumer_id":"codespace","generation":"g1","secret":"` + secretA + `"}}}`,
			Request{Method: MethodAuthenticate, Credential: Credential{Kind: CredentialConsumer, ConsumerID: "codespace", Generation: "g1", Secret: secret}}},
		{"authenticate_administrator", `{"method":"authenticate","params":{"credential":{"secret":"` + secretA + `","kind":"administrator"}}}`,
			Request{Method: MethodAuthenticate, Credential: Credential{Kind: CredentialAdministrator, Secret: secret}}},
		{"status", `{"method":"status"}`, Request{Method: MethodStatus}},
		{"status_params_null", `{"method":"status","params":null}`, Request{Method: MethodStatus}},
		{"register", `{"method":"register","params":{"instance_id":"codespace-1"}}`, Request{Method: MethodRegister, InstanceID: "codespace-1"}},
		{"admit", `{"method":"admit","params":{"request":` + admissionText + `}}`, Request{Method: MethodAdmit, Admission: admission}},
		{"begin_launch", `{"method":"begin_launch","params":{"key":` + keyJSON + `}}`, Request{Method: MethodBeginLaunch, Key: key1}},
		{"lookup", `{"params":{"key":` + keyJSON + `},"method":"lookup"}`, Request{Method: MethodLookup, Key: key1}},
		{"cancel", `{"method":"cancel","params":{"key":` + keyJSON + `}}`, Request{Method: MethodCancel, Key: key1}},
		{"abandon_launch", `{"method":"abandon_launch","params":{"key":` + keyJSON + `,"reason":"helper_exited"}}`,
			Request{Method: MethodAbandonLaunch, Key: key1, Reason: AbandonHelperExited}},
		{"observe", `{"method":"observe","params":{"key":` + keyJSON + `}}`, Request{Method: MethodObserve, Key: key1}},
		{"terminate", `{"method":"terminate","params":{"key":` + keyJSON + `,"signal":"hangup"}}`,
			Request{Method: MethodTerminate, Key: key1, Signal: SignalHangup}},
		{"launch", `{"method":"launch","params":{"key":` + keyJSON + `,"instance_id":"codespace-1","permit":"` + secretA + `"}}`,
			Request{Method: MethodLaunch, Key: key1, InstanceID: "codespace-1", Permit: secret}},
		{"admit_lease", `{"method":"admit_lease","params":{"key":` + keyJSON + `,"budget":{"cpu_milli":1,"memory_bytes":2,"tasks":3},"ttl_ms":1500}}`,
			Request{Method: MethodAdmitLease, Key: key1, Budget: Budget{1, 2, 3}, TTLMS: &ttl}},
		{"admit_lease_ttl_null", `{"method":"admit_lease","params":{"key":` + keyJSON + `,"budget":{"cpu_milli":1,"memory_bytes":2,"tasks":3},"ttl_ms":null}}`,
			Request{Method: MethodAdmitLease, Key: key1, Budget: Budget{1, 2, 3}}},
		{"admit_lease_ttl_absent", `{"method":"admit_lease","params":{"key":` + keyJSON + `,"budget":{"cpu_milli":1,"memory_bytes":2,"tasks":3}}}`,
			Request{Method: MethodAdmitLease, Key: key1, Budget: Budget{1, 2, 3}}},
		{"admit_child", `{"method":"admit_child","params":{"lease":` + keyJSON + `,"token":"` + secretA + `","request":` + admissionText + `}}`,
			Request{Method: MethodAdmitChild, Key: key1, Token: secret, Admission: admission}},
		{"end_lease", `{"method":"end_lease","params":{"key":` + keyJSON + `}}`, Request{Method: MethodEndLease, Key: key1}},
		{"lease_status", `{"method":"lease_status","params":{"key":` + keyJSON + `,"token":"` + secretA + `"}}`,
			Request{Method: MethodLeaseStatus, Key: key1, Token: secret}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeRequest([]byte(" \n" + frameOf(tc.body) + "\t"))
			if err != nil {
				t.Fatalf("DecodeRequest = %v", err)
			}
			tc.want.Version, tc.want.ID = 1, 5
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DecodeRequest = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Everything DevGuard's strict decoding refuses is refused, with a
// message that never repeats a value.
func TestDecodeRefusesWhatDevGuardRefuses(t *testing.T) {
	lookup := `{"method":"lookup","params":{"key":` + keyJSON + `}}`
	uint64Max := "18446744073709551615"
	tests := []struct {
		name  string
		frame string
	}{
		{"empty", ``},
		{"not_json", `hello`},
		{"trailing", frameOf(lookup) + `{}`},
		{"not_utf8", "{\"version\":1,\"request_id\":5,\"body\":{\"method\":\"register\",\"params\":{\"instance_id\":\"\xff\"}}}"},
		{"lone_surrogate", frameOf(`{"method":"register","params":{"instance_id":"\ud800"}}`)},
		{"low_surrogate_first", frameOf(`{"method":"register","params":{"instance_id":"\udc00\ud800"}}`)},
		{"control_character", frameOf("{\"method\":\"register\",\"params\":{\"instance_id\":\"a\x01\"}}")},
		{"unknown_envelope_field", `{"version":1,"request_id":5,"trace":1,"body":` + lookup + `}`},
		{"missing_request_id", `{"version":1,"body":` + lookup + `}`},
		{"missing_body", `{"version":1,"request_id":5}`},
		{"duplicate_field", `{"version":1,"version":1,"request_id":5,"body":` + lookup + `}`},
		{"field_case", `{"Version":1,"request_id":5,"body":` + lookup + `}`},
		{"version_null", `{"version":null,"request_id":5,"body":` + lookup + `}`},
		{"version_fraction", `{"version":1.0,"request_id":5,"body":` + lookup + `}`},
		{"version_exponent", `{"version":1e0,"request_id":5,"body":` + lookup + `}`},
		{"version_negative", `{"version":-1,"request_id":5,"body":` + lookup + `}`},
		{"version_leading_zero", `{"version":01,"request_id":5,"body":` + lookup + `}`},
		{"version_beyond_u32", `{"version":4294967296,"request_id":5,"body":` + lookup + `}`},
		{"request_id_beyond_u64", `{"version":1,"request_id":18446744073709551616,"body":` + lookup + `}`},
		{"request_id_string", `{"version":1,"request_id":"5","body":` + lookup + `}`},
		{"unknown_method", frameOf(`{"method":"release","params":{"key":` + keyJSON + `}}`)},
		{"method_case", frameOf(`{"method":"Lookup","params":{"key":` + keyJSON + `}}`)},
		{"unknown_body_field", frameOf(`{"method":"status","nonce":1}`)},
		{"status_with_params", frameOf(`{"method":"status","params":{}}`)},
		{"missing_params", frameOf(`{"method":"lookup"}`)},
		{"params_null", frameOf(`{"method":"lookup","params":null}`)},
		{"unknown_params_field", frameOf(`{"method":"lookup","params":{"key":` + keyJSON + `,"pid":1}}`)},
		{"unknown_key_field", frameOf(`{"method":"lookup","params":{"key":{"consumer_id":"c","consumer_generation":"g","attempt_id":"a","owner":"x"}}}`)},
		{"missing_key_field", frameOf(`{"method":"lookup","params":{"key":{"consumer_id":"c","attempt_id":"a"}}}`)},
		{"key_not_object", frameOf(`{"method":"lookup","params":{"key":"c/g/a"}}`)},
		{"unknown_capability", frameOf(`{"method":"hello","params":{"compatibility":{"minimum_protocol":1,"maximum_protocol":1,"required":["root"]}}}`)},
		{"required_not_array", frameOf(`{"method":"hello","params":{"compatibility":{"minimum_protocol":1,"maximum_protocol":1,"required":"durable_admission"}}}`)},
		{"missing_required", frameOf(`{"method":"hello","params":{"compatibility":{"minimum_protocol":1,"maximum_protocol":1}}}`)},
		{"unknown_credential_kind", frameOf(`{"method":"authenticate","params":{"credential":{"kind":"helper","secret":"` + secretA + `"}}}`)},
		{"credential_without_kind", frameOf(`{"method":"authenticate","params":{"credential":{"secret":"` + secretA + `"}}}`)},
		{"credential_extra_field", frameOf(`{"method":"authenticate","params":{"credential":{"kind":"consumer","consumer_id":"c","generation":"g","secret":"` + secretA + `","pid":1,"uid":0}}}`)},
		{"administrator_with_consumer_id", frameOf(`{"method":"authenticate","params":{"credential":{"kind":"administrator","consumer_id":"c","secret":"` + secretA + `"}}}`)},
		{"secret_uppercase", frameOf(`{"method":"authenticate","params":{"credential":{"kind":"administrator","secret":"` + strings.ToUpper(secretA) + `"}}}`)},
		{"secret_short", frameOf(`{"method":"authenticate","params":{"credential":{"kind":"administrator","secret":"` + secretA[:63] + `"}}}`)},
		{"permit_long", frameOf(`{"method":"launch","params":{"key":` + keyJSON + `,"instance_id":"i","permit":"` + secretA + `0"}}`)},
		{"unknown_reason", frameOf(`{"method":"abandon_launch","params":{"key":` + keyJSON + `,"reason":"gone"}}`)},
		{"unknown_signal", frameOf(`{"method":"terminate","params":{"key":` + keyJSON + `,"signal":"stop"}}`)},
		{"unknown_level", frameOf(`{"method":"admit","params":{"request":` + strings.Replace(admissionJSON, `"kernel"`, `"strict"`, 1) + `}}`)},
		{"quantity_beyond_u64", frameOf(`{"method":"admit","params":{"request":` + strings.Replace(admissionJSON, "67108864", uint64Max+"0", 1) + `}}`)},
		{"quantity_negative", frameOf(`{"method":"admit","params":{"request":` + strings.Replace(admissionJSON, "67108864", "-1", 1) + `}}`)},
		{"quantity_fraction", frameOf(`{"method":"admit","params":{"request":` + strings.Replace(admissionJSON, "67108864", "1.5", 1) + `}}`)},
		{"intent_extra_field", frameOf(`{"method":"admit","params":{"request":` + strings.Replace(admissionJSON, `"profile"`, `"owner":"x","profile"`, 1) + `}}`)},
		{"deep_nesting", frameOf(strings.Repeat("[", 200) + strings.Repeat("]", 200))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tc.frame))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeRequest = %v, want ErrMalformed", err)
			}
			if strings.Contains(err.Error(), secretA[:16]) || strings.Contains(err.Error(), strings.ToUpper(secretA[:16])) {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
}

// u64 quantities decode in full: the largest is a quantity like any
// other, for admission to decide.
func TestDecodeTakesEveryU64Quantity(t *testing.T) {
	text := strings.Replace(strings.Replace(admissionJSON, "DIGEST", digestB, 1), "67108864", "18446744073709551615", 1)
	r, err := DecodeRequest([]byte(frameOf(`{"method":"admit","params":{"request":` + text + `}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Admission.Intent.Requested.MemoryBytes; got != 1<<64-1 {
		t.Errorf("memory_bytes = %d, want 2^64-1", got)
	}
}

func TestSecretNeverPrintsItself(t *testing.T) {
	s, _ := NewSecret(secretA)
	c := Credential{Kind: CredentialConsumer, Secret: s}
	for _, out := range []string{s.String(), s.GoString(), strings.Join([]string{
		fmt.Sprintf("%v", s), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%s!", s),
	}, " ")} {
		if strings.Contains(out, secretA) {
			t.Fatalf("formatted secret shows itself: %s", out)
		}
	}
}
