# Multi-process DDP tests: tests/distributed/ddp_worker.cpp trained by 2 processes over Gloo on loopback,
# launched by volt itself or with torchrun's variables; failure scenarios must end within a bounded time.
add_executable(volt_ddp_worker ${CMAKE_CURRENT_SOURCE_DIR}/distributed/ddp_worker.cpp)
target_link_libraries(volt_ddp_worker PRIVATE ${VOLT_TEST_TARGET})
target_compile_options(volt_ddp_worker PRIVATE ${VOLT_WARNINGS})
target_precompile_headers(volt_ddp_worker REUSE_FROM volt_test_pch)
foreach(scenario launcher-plain launcher-accumulate launcher-clip torchrun-plain torchrun-accumulate torchrun-clip
                 launcher-kill launcher-throw launcher-exit torchrun-kill torchrun-throw missing-rank)
  add_test(NAME volt.ddp.${scenario}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/run_ddp.sh $<TARGET_FILE:volt_ddp_worker> ${scenario})
  set_tests_properties(volt.ddp.${scenario} PROPERTIES LABELS ddp TIMEOUT 300 PASS_REGULAR_EXPRESSION "PASSED")
endforeach()
