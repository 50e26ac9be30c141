// fork_child: the one fork story. fork() leaves the child one thread, the one that forked, and every lock a
// parent thread held stays held forever. So nothing the shim keeps is locked in a child until it was
// rebuilt, and everything that a lock guards is rebuilt here, in the atfork child handler, in one place:
// the shim's process-wide objects and what a child does with each are listed in docs/ARCHITECTURE.md,
// "Process-wide state", and that list and this handler are kept in step.
#pragma once

namespace cumemaudit::shim {

// The atfork child handler (registered when the library loads). One thread runs. It allocates one logger
// (glibc's fork leaves malloc usable in the child) and takes no lock.
void in_fork_child() noexcept;

}  // namespace cumemaudit::shim
