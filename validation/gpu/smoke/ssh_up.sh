#!/bin/bash
# OpenSSH on the lent GPU machine, which has none: Debian 12's ssh, sshd and ssh-keygen (openssh 9.2p1, from
# `apt-get download openssh-client openssh-server` on the CPU machine, prepare.sh) with the libraries they link,
# unpacked into $SSHROOT; only the libraries this machine lacks (ldd's "not found") are put on their
# LD_LIBRARY_PATH, through wrappers in $SSHROOT/wrap (put first on PATH: the `ssh` specaudit runs is the wrapper).
# sshd listens on 127.0.0.1 only, with a host key and a user key made here; ~/.ssh/config names it `localhost`.
#
#   SSH_TAR=.gpu/smoke/ssh.tar.xz SESSION_ENV="PATH=... PYTHONPATH=..." bash ssh_up.sh OUTDIR
#
# SESSION_ENV: what every ssh session gets (sshd's SetEnv), as a node's own login environment would have it.
# Writes OUTDIR/ssh-ldd.txt (what was missing), OUTDIR/ssh-up.txt (versions, the check), and prints the port.
set -u
O=${1:-/tmp/out}; mkdir -p "$O"
R=${SSHROOT:-/root/ssh}; K=$R/keys
mkdir -p "$R/need" "$R/wrap" "$K"
xz -dc "${SSH_TAR:-.gpu/smoke/ssh.tar.xz}" | tar -C "$R" -xf -
: > "$O/ssh-ldd.txt"
for b in ssh sshd ssh-keygen; do
  echo "## ldd $b (the machine's own libraries)" >> "$O/ssh-ldd.txt"
  ldd "$R/bin/$b" >> "$O/ssh-ldd.txt" 2>&1
  for lib in $(ldd "$R/bin/$b" 2>/dev/null | awk '/not found/ {print $1}'); do
    ln -sf "$R/lib/$lib" "$R/need/$lib"
  done
done
# a library pulled in by a carried one may be missing too: repeat with what is already added
for _ in 1 2 3; do
  for lib in "$R"/need/*; do
    [ -e "$lib" ] || continue
    for dep in $(LD_LIBRARY_PATH=$R/need ldd "$lib" 2>/dev/null | awk '/not found/ {print $1}'); do
      ln -sf "$R/lib/$dep" "$R/need/$dep"
    done
  done
done
echo "## carried libraries used: $(ls "$R/need" | tr '\n' ' ')" >> "$O/ssh-ldd.txt"
for b in ssh sshd ssh-keygen; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$R/need" "$R/bin/$b" > "$R/wrap/$b"
  chmod +x "$R/wrap/$b"
  echo "## ldd $b with the carried ones" >> "$O/ssh-ldd.txt"
  LD_LIBRARY_PATH=$R/need ldd "$R/bin/$b" | grep -E "not found|=> $R" >> "$O/ssh-ldd.txt" 2>&1
done
# sshd's privilege separation: its user and its empty directory
id sshd > /dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd 2>> "$O/ssh-up.txt" \
  || echo "sshd:x:74:65534:privsep:/run/sshd:/usr/sbin/nologin" >> /etc/passwd
mkdir -p /run/sshd && chmod 755 /run/sshd
rm -f "$K"/host_key* "$K"/id_user*
"$R/wrap/ssh-keygen" -q -t ed25519 -N "" -f "$K/host_key"
"$R/wrap/ssh-keygen" -q -t ed25519 -N "" -f "$K/id_user"
cp "$K/id_user.pub" "$K/authorized_keys"; chmod 600 "$K/authorized_keys"
PORT=${SSH_PORT:-2222}
SETENV=""; [ -n "${SESSION_ENV:-}" ] && SETENV="SetEnv $(for kv in $SESSION_ENV; do printf '"%s" ' "$kv"; done)"
cat > "$K/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $PORT
HostKey $K/host_key
AuthorizedKeysFile $K/authorized_keys
PidFile $K/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowTcpForwarding local
MaxSessions 64
MaxStartups 64
ClientAliveInterval 5
LogLevel INFO
$SETENV
EOF
# sshd re-executes itself: an absolute path, and the wrapper's LD_LIBRARY_PATH (sessions get a fresh environment)
LD_LIBRARY_PATH=$R/need "$R/bin/sshd" -f "$K/sshd_config" -E "$K/sshd.log"
mkdir -p ~/.ssh && chmod 700 ~/.ssh
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$K/host_key.pub")" > "$K/known_hosts"
cat > ~/.ssh/config <<EOF
Host localhost
  HostName 127.0.0.1
  Port $PORT
  User $(id -un)
  IdentityFile $K/id_user
  IdentitiesOnly yes
  UserKnownHostsFile $K/known_hosts
  StrictHostKeyChecking yes
  LogLevel ERROR
EOF
chmod 600 ~/.ssh/config
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
{
  echo "ssh: $("$R/wrap/ssh" -V 2>&1)"
  echo "sshd_config:"; sed 's/^/  /' "$K/sshd_config"
  echo "check: $(PATH=$R/wrap:$PATH ssh -o BatchMode=yes localhost -- 'echo "$(id -un)@$(hostname) over $SSH_CONNECTION"; command -v python3 vllm; echo PYTHONPATH=$PYTHONPATH' 2>&1 | tr '\n' ';')"
} >> "$O/ssh-up.txt"
cat "$O/ssh-up.txt" | tail -1
