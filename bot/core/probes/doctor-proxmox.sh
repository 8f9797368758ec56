# specops doctor, on the Proxmox host (POSIX sh; read by bot/core/doctor.py)
# $1 the container id
R="${SPECOPS_SYSROOT:-}"; ct="$1"
echo "==== lspci"; lspci -nnk -d 10de: 2>&1
echo "==== kernel-module"; cat "$R/proc/driver/nvidia/version" 2>&1
echo "==== lxc-conf"; cat "$R/etc/pve/lxc/$ct.conf" 2>&1
echo "==== devices"; for f in "$R"/dev/nvidia*; do [ -e "$f" ] && ls -ln "$f"; done; echo "==== end"
