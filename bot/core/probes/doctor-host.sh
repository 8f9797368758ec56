# specops doctor, inside the container or host that runs vLLM (POSIX sh; read by bot/core/doctor.py)
# $1 port, $2 tensor parallel size, $3 the vllm executable, $4... model paths
R="${SPECOPS_SYSROOT:-}"; port="$1"; tp="$2"; vllm="$3"; shift 3
echo "==== devices"; for f in "$R"/dev/nvidia*; do [ -e "$f" ] && ls -ln "$f"; done; echo "==== end"
echo "==== nvidia-smi"; nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.free --format=csv,noheader,nounits 2>&1; echo "exit=$?"
echo "==== compute-apps"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits 2>/dev/null
echo "==== kernel-module"; cat "$R/proc/driver/nvidia/version" 2>&1
echo "==== libnvidia-ml"; for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib; do ls "$R$d" 2>/dev/null | grep '^libnvidia-ml\.so\.[0-9]' | sed "s|^|$d/|"; done
echo "==== cuda-compat"; for d in "$R"/usr/local/cuda*/compat; do [ -d "$d" ] && ls "$d" | grep '^libcuda\.so\.[0-9]' | sed "s|^|${d#$R}/|"; done; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
echo "==== shm"; grep ' /dev/shm ' "$R/proc/mounts" 2>/dev/null; df -Pk "$R/dev/shm" 2>/dev/null | tail -n 1
echo "==== disk"; for m in "$@"; do d="$m"; while [ ! -e "$R$d" ] && [ "$d" != / ]; do d=$(dirname "$d"); done; echo "$m $(df -Pk "$R$d" 2>/dev/null | tail -n 1)"; done
echo "==== vllm"; if [ -x "$vllm" ]; then echo "bin=$vllm"; first=$(head -c 256 "$vllm" | head -n 1); case "$first" in "#!"*) py=${first#??}; v=$($py -c 'from importlib.metadata import version; print(version("vllm"))' 2>/dev/null);; esac; [ -n "${v:-}" ] || v=$("$vllm" --version 2>/dev/null | tail -n 1); echo "version=${v:-}"; else echo "missing=$vllm"; fi
echo "==== hf-token"; if [ -n "${HF_TOKEN:-}${HUGGING_FACE_HUB_TOKEN:-}" ]; then echo env; elif [ -s "${HF_HOME:-$HOME/.cache/huggingface}/token" ]; then echo file; else echo none; fi
echo "==== port"; ss -Hltnp "sport = :$port" 2>&1
echo "==== tp"; echo "$tp"
