# The MPI suite (ctest label "mpi"): tests/dist/mpi_collectives.c, mpi_llama.c and mpi_gpt.c under
# `mpirun --oversubscribe -np 2` and `-np 4` with Open MPI's shared-memory transport, driven by
# tests/dist/run_mpi.sh (per-run timeout, root allowed only for these runs). Skipped, with the
# reason printed, when MPI was not found at configure time.
if(TARGET mixrt_mpi)
  find_program(MIXRT_MPIRUN NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
  add_executable(mpi_collectives "${CMAKE_CURRENT_LIST_DIR}/mpi_collectives.c")
  target_link_libraries(mpi_collectives PRIVATE mixrt_mpi mixrt_internal)
  # The sharded decoders share mpi_support.c (rank, FAIL lines, model and session set-up).
  add_executable(mpi_llama "${CMAKE_CURRENT_LIST_DIR}/mpi_llama.c" "${CMAKE_CURRENT_LIST_DIR}/mpi_support.c")
  target_link_libraries(mpi_llama PRIVATE mixrt_mpi mixrt_internal)
  # The zoo's torch GPT decoder (exported by run_mpi.sh into zoo-mpi/ of the build tree).
  add_executable(mpi_gpt "${CMAKE_CURRENT_LIST_DIR}/mpi_gpt.c" "${CMAKE_CURRENT_LIST_DIR}/mpi_support.c")
  target_link_libraries(mpi_gpt PRIVATE mixrt_mpi mixrt_internal)
  add_test(NAME mpi COMMAND sh "${CMAKE_CURRENT_LIST_DIR}/run_mpi.sh" "${MIXRT_MPIRUN}"
                            "$<TARGET_FILE:mpi_collectives>" "$<TARGET_FILE:mpi_llama>"
                            "$<TARGET_FILE:mpi_gpt>" "${CMAKE_BINARY_DIR}/zoo-mpi")
  # `mixrt demo --tp 2` / `mixrt run --tp 2` under mpirun (tests/dist/run_cli_tp.sh).
  add_test(NAME mpi_cli COMMAND sh "${CMAKE_CURRENT_LIST_DIR}/run_cli_tp.sh" "${MIXRT_MPIRUN}"
                                "$<TARGET_FILE:mixrt_cli>")
else()
  add_test(NAME mpi COMMAND sh -c "echo 'mpi: skipped: MPI was not found at configure time (libopenmpi-dev, MIXRT_MPI)'; exit 77")
  add_test(NAME mpi_cli COMMAND sh -c "echo 'mpi_cli: skipped: MPI was not found at configure time'; exit 77")
endif()
set_tests_properties(mpi PROPERTIES LABELS "mpi" TIMEOUT 150 SKIP_RETURN_CODE 77)
set_tests_properties(mpi_cli PROPERTIES LABELS "mpi" TIMEOUT 60 SKIP_RETURN_CODE 77)
# Under AddressSanitizer: leak checking off for these runs only (Open MPI unloads its components
# at MPI_Finalize and leaves their allocations behind, in stacks LeakSanitizer can no longer
# name, so no suppression can single them out; mixrt's own leaks are checked by every other
# suite), and the quick subset (2 ranks; each rank runs several times slower there). Memory
# errors in mixrt's MPI code still fail the runs.
if(MIXRT_SANITIZE STREQUAL "address")
  set_tests_properties(mpi mpi_cli PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;MIXRT_MPI_QUICK=1")
endif()
