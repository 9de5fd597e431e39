package egress

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
)

// clientEnv, when set, makes the test binary a client of the proxy, run
// as a child process inside a scope: "socks5" or "connect", with the
// arguments NETWORK ADDRESS HOST PORT PAYLOAD, prints the proxy's answer
// and the echo of PAYLOAD; "hold" with NETWORK ADDRESS COUNT opens COUNT
// connections, prints "ready" and keeps them until stdin closes.
const clientEnv = "MARSHAL_EGRESS_TEST_CLIENT"

func runClient(mode string, args []string) int {
	if err := client(mode, args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func client(mode string, args []string) error {
	if mode == "hold" {
		n, _ := strconv.Atoi(args[2])
		var conns []net.Conn
		for range n {
			c, err := net.Dial(args[0], args[1])
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		for _, c := range conns {
			c.Close()
		}
		return nil
	}
	network, addr, host, port, payload := args[0], args[1], args[2], args[3], args[4]
	c, err := net.Dial(network, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	switch mode {
	case "socks5":
		p, _ := strconv.Atoi(port)
		c.Write([]byte{5, 1, 0})
		var greet [2]byte
		if _, err := io.ReadFull(r, greet[:]); err != nil {
			return err
		}
		req := []byte{5, 1, 0, 3, byte(len(host))}
		req = append(req, host...)
		req = binary.BigEndian.AppendUint16(req, uint16(p))
		c.Write(req)
		var reply [10]byte
		if _, err := io.ReadFull(r, reply[:]); err != nil {
			return err
		}
		fmt.Printf("reply %d\n", reply[1])
		if reply[1] != 0 {
			return nil
		}
	case "connect", "connect-idle":
		fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, port, host, port)
		status, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if line == "\r\n" {
				break
			}
		}
		code := strings.Fields(status)[1]
		fmt.Printf("status %s\n", code)
		if code != "200" {
			return nil
		}
	default:
		return fmt.Errorf("unknown client mode %q", mode)
	}
	c.Write([]byte(payload))
	echo := make([]byte, len(payload))
	if _, err := io.ReadFull(r, echo); err != nil {
		return err
	}
	fmt.Printf("echo %s\n", echo)
	if mode == "connect-idle" {
		io.Copy(io.Discard, r)
		fmt.Println("closed")
	}
	return nil
}
