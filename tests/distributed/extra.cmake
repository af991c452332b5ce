# Multi-process DDP tests: tests/distributed/programs/ddp_worker.cpp trained by 2 processes over Gloo on loopback,
# launched by volt itself or with torchrun's variables; failure scenarios must end within a bounded time.
add_executable(volt_ddp_worker ${CMAKE_CURRENT_SOURCE_DIR}/distributed/programs/ddp_worker.cpp)
target_link_libraries(volt_ddp_worker PRIVATE ${VOLT_TEST_TARGET})
target_compile_options(volt_ddp_worker PRIVATE ${VOLT_WARNINGS})
target_precompile_headers(volt_ddp_worker REUSE_FROM volt_test_pch)
set(volt_ddp_scenarios launcher-plain launcher-accumulate launcher-clip launcher-manual launcher-ema launcher-datamodule launcher-fabric torchrun-plain torchrun-accumulate torchrun-clip
                       launcher-kill launcher-throw launcher-exit torchrun-kill torchrun-throw missing-rank missing-host
                       predict-first fabric-save-fail trainer-save torchrun-buffers)
if(VOLT_TORCH_HAS_CUDA)
  # NCCL on 2 GPUs; skipped (exit 77) on machines with fewer.
  list(APPEND volt_ddp_scenarios cuda-plain cuda-accumulate cuda-clip)
endif()
# Two hosts made of network namespaces (root with CAP_NET_ADMIN; a skip, exit 77, without): 2 nodes x 2 processes
# through volt's launcher, torchrun's and SLURM's variables, and a node killed mid-epoch (node 1, then node 0 with the store).
foreach(scenario IN ITEMS launcher torchrun slurm kill-node kill-main-node)
  add_test(NAME volt.ddp.multinode-${scenario}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/run_multinode.sh $<TARGET_FILE:volt_ddp_worker> ${scenario})
  set_tests_properties(volt.ddp.multinode-${scenario} PROPERTIES LABELS ddp TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
foreach(scenario IN LISTS volt_ddp_scenarios)
  add_test(NAME volt.ddp.${scenario}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/run_ddp.sh $<TARGET_FILE:volt_ddp_worker> ${scenario})
  set_tests_properties(volt.ddp.${scenario} PROPERTIES LABELS ddp TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
